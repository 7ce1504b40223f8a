/*
 * Replays a byte stream through the request parser the way the server reads
 * a connection, and records what the parser reported. The fuzz targets
 * (fuzz_parser.c, fuzz_reads.c) replay the same bytes read in different
 * pieces and compare the records: the parser's verdict must not depend on
 * how the bytes arrived.
 *
 * A record is text: the request line and its parts, Host, every field and
 * trailer, and for each complete request its Content-Length, flags
 * (chunked, close, ...), keep-alive verdict and decoded body bytes; then the
 * final status (error code), the number of requests, and where a clean run
 * stopped. On the way every callback checks what the parser promises and
 * aborts when a promise is broken.
 */
#ifndef NARWHAL_FUZZ_REPLAY_H
#define NARWHAL_FUZZ_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "../ext/narwhal_http/parser.h"

/* Small limits so that the fuzzer reaches them. */
#define FUZZ_MAX_REQUEST_LINE 512
#define FUZZ_MAX_HEADER_SIZE 2048
#define FUZZ_MAX_HEADER_FIELDS 16
#define FUZZ_MAX_BODY 4096
#define FUZZ_MAX_INPUT (64 * 1024)

typedef struct {
  char *ptr;
  size_t len, cap;
} text;

/* What happens to the buffered bytes between reads. */
enum replay_buffer {
  /* consumed bytes are dropped before every read */
  REPLAY_COMPACT,
  /* never dropped: offsets keep growing (replay_compact may drop them) */
  REPLAY_GROW,
  /*
   * as lib/narwhal/connection.rb does: a read into a buffer with nothing
   * left unconsumed replaces its bytes, else it is appended; consumed bytes
   * are dropped (discard_consumed) once a request is complete and after
   * body bytes were taken. The buffer moves to a new allocation on every
   * change (as a Ruby String may), so a pointer the parser kept from an
   * earlier call is a use-after-free for AddressSanitizer.
   */
  REPLAY_CONNECTION
};

typedef struct {
  nw_parser p;
  int how;          /* enum replay_buffer */
  text log;         /* everything that must agree between replays */
  text body;        /* body bytes of the current request */
  char *buf;        /* what the server would have buffered */
  size_t len, off, cap;
  int in_body;      /* 0 head, 1 Content-Length body, 2 chunked body */
  uint64_t remaining;
  unsigned requests;
  int failed;
} replay;

typedef struct {
  text log;
  unsigned requests;
  int status;       /* error status, 0 when none */
} replay_outcome;

/* size: the most bytes that will be read in all */
void replay_start(replay *r, enum replay_buffer how, size_t size);
/* One read of n bytes, parsed at once as far as it goes. */
void replay_read(replay *r, const uint8_t *data, size_t n);
/* Drops the consumed bytes now (moving the rest to a new allocation). */
void replay_compact(replay *r);
/* The stream ended: returns the record and frees the rest. */
replay_outcome replay_finish(replay *r);

int replay_same(const replay_outcome *a, const replay_outcome *b);
void replay_show(const char *label, const replay_outcome *o);
void replay_outcome_free(replay_outcome *o);

uint64_t fuzz_hash(const uint8_t *data, size_t size);

#endif
