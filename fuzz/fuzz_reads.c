/*
 * libFuzzer target for the request parser read the way a connection reads
 * it, in pieces the fuzzer chooses.
 *
 * The input is a read plan followed by the bytes a client sends:
 *
 *   byte 0           k = byte & 31, the length of the plan
 *   bytes 1..k       one byte per read, used in turn: the low 7 bits are the
 *                    read's size (0: all that is left), the high bit drops
 *                    the consumed bytes before that read (replay (c) only);
 *                    no plan (k = 0) reads one byte at a time
 *   the rest         the stream: pipelined requests
 *
 * So the fuzzer's mutations move the split points and the read sizes, and
 * coverage guides them to the splits that matter (inside CRLF, a chunk-size
 * line, between a body and the next request). The stream is replayed
 * (replay.c) three times:
 *
 *   (a) whole, in one read;
 *   (b) in the planned reads, with the buffer handled as
 *       lib/narwhal/connection.rb does (appended to while bytes are left,
 *       replaced once all are consumed, consumed bytes dropped after a
 *       request and after body bytes), moved on every change;
 *   (c) in the planned reads, consumed bytes dropped where the plan says.
 *
 * (b) and (c) must record exactly what (a) recorded — request lines,
 * fields, body framing and bytes, keep-alive verdicts, error status,
 * number of requests — or the target prints the records and aborts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "replay.h"

#define PLAN_LENGTH_MASK 31
#define READ_SIZE_MASK 0x7f
#define COMPACT_FIRST 0x80

typedef struct {
  const uint8_t *plan;
  size_t plan_len;
  const uint8_t *stream;
  size_t size;
} input;

enum { WHOLE, CONNECTION, CHOSEN_COMPACTION };
static const char *const replay_name[] = {
  "whole", "planned reads, connection's buffer", "planned reads, compacted where planned"
};

static replay_outcome run(const input *in, int how)
{
  replay r;
  size_t at = 0, i = 0;

  replay_start(&r, how == CHOSEN_COMPACTION ? REPLAY_GROW : REPLAY_CONNECTION, in->size);
  while (at < in->size && !r.failed) {
    size_t left = in->size - at, n = left;
    if (how != WHOLE) {
      uint8_t step = in->plan_len ? in->plan[i++ % in->plan_len] : 1;
      if (how == CHOSEN_COMPACTION && (step & COMPACT_FIRST)) replay_compact(&r);
      n = step & READ_SIZE_MASK;
      if (n == 0 || n > left) n = left;
    }
    replay_read(&r, in->stream + at, n);
    at += n;
  }
  return replay_finish(&r);
}

static void show_plan(const input *in)
{
  size_t i;
  fprintf(stderr, "read plan (%zu):", in->plan_len);
  for (i = 0; i < in->plan_len; i++) {
    fprintf(stderr, " %s%u", (in->plan[i] & COMPACT_FIRST) ? "compact+" : "",
            in->plan[i] & READ_SIZE_MASK);
  }
  fprintf(stderr, "%s\n", in->plan_len ? "" : " one byte per read");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  input in;
  replay_outcome whole;
  int k;

  if (size == 0 || size > FUZZ_MAX_INPUT) return 0;
  in.plan_len = data[0] & PLAN_LENGTH_MASK;
  if (in.plan_len + 1 >= size) return 0; /* no stream */
  in.plan = data + 1;
  in.stream = data + 1 + in.plan_len;
  in.size = size - 1 - in.plan_len;

  whole = run(&in, WHOLE);
  for (k = CONNECTION; k <= CHOSEN_COMPACTION; k++) {
    replay_outcome other = run(&in, k);
    if (!replay_same(&whole, &other)) {
      fprintf(stderr, "fuzz_reads: the parser disagrees with itself (%s vs whole)\n", replay_name[k]);
      show_plan(&in);
      replay_show(replay_name[WHOLE], &whole);
      replay_show(replay_name[k], &other);
      abort();
    }
    replay_outcome_free(&other);
  }
  replay_outcome_free(&whole);
  return 0;
}
