/*
 * libFuzzer target for the request parser (ext/narwhal_http/parser.c).
 *
 * Differential: the input is replayed as a stream of pipelined requests
 * four times (replay.c), feeding the parser the way the server does
 * (unconsumed bytes stay in the buffer and are passed again, at the
 * returned offset, with the next read):
 *
 *   (a) whole, in one read;
 *   (b) split in two reads at a point derived from the data;
 *   (c) one byte per read, the buffer compacted before every read;
 *   (d) reads of irregular sizes (1..32 bytes, derived from the data) into a
 *       buffer that is never compacted, so offsets keep growing.
 *
 * The four records must be identical, or the target prints them and aborts.
 * fuzz_reads.c lets the fuzzer choose the reads instead.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "replay.h"

enum { WHOLE, SPLIT, BYTEWISE, IRREGULAR };
static const char *const strategy_name[] = { "whole", "split in two", "byte at a time", "irregular reads" };

static replay_outcome run(const uint8_t *data, size_t size, int strategy, uint64_t seed)
{
  replay r;
  size_t at = 0;

  replay_start(&r, strategy == IRREGULAR ? REPLAY_GROW : REPLAY_COMPACT, size);
  while (at < size && !r.failed) {
    size_t n;
    switch (strategy) {
    case WHOLE: n = size; break;
    case SPLIT: n = at == 0 ? 1 + (size_t)(seed % size) : size - at; break;
    case BYTEWISE: n = 1; break;
    default:
      seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17; /* xorshift64 */
      n = 1 + (size_t)(seed % 32);
      break;
    }
    if (n > size - at) n = size - at;
    replay_read(&r, data + at, n);
    at += n;
  }
  return replay_finish(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  replay_outcome whole;
  uint64_t seed;
  int k;

  if (size == 0 || size > FUZZ_MAX_INPUT) return 0;
  seed = fuzz_hash(data, size) | 1;
  whole = run(data, size, WHOLE, seed);
  for (k = SPLIT; k <= IRREGULAR; k++) {
    replay_outcome other = run(data, size, k, seed);
    if (!replay_same(&whole, &other)) {
      fprintf(stderr, "fuzz_parser: the parser disagrees with itself (%s vs whole)\n", strategy_name[k]);
      if (k == SPLIT) fprintf(stderr, "split after %zu bytes\n", 1 + (size_t)(seed % size));
      replay_show(strategy_name[WHOLE], &whole);
      replay_show(strategy_name[k], &other);
      abort();
    }
    replay_outcome_free(&other);
  }
  replay_outcome_free(&whole);
  return 0;
}
