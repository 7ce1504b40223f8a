/*
 * libFuzzer target for the request parser (ext/narwhal_http/parser.c).
 *
 * Differential: the input is parsed as a stream of pipelined requests three
 * times — delivered whole, split in two at a point taken from the data, and
 * one byte at a time — the way the server feeds the parser (unconsumed bytes
 * are kept and passed again with the next read). Every event the callbacks
 * see is folded into a digest; the three digests, the final status and the
 * number of requests must agree, or the target aborts. AddressSanitizer and
 * UBSan catch memory and arithmetic errors on the way.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ext/narwhal_http/parser.h"

/* Small limits so that the fuzzer reaches them. */
#define FUZZ_MAX_REQUEST_LINE 512
#define FUZZ_MAX_HEADER_SIZE 2048
#define FUZZ_MAX_HEADER_FIELDS 16
#define FUZZ_MAX_BODY 4096
#define FUZZ_MAX_INPUT (64 * 1024)

enum { EV_LINE = 1, EV_HOST, EV_FIELD, EV_DONE, EV_BODY, EV_END, EV_STATUS };

typedef struct {
  uint64_t digest;
  unsigned requests;
  int status; /* HTTP status of a failure; 0 = input ended cleanly or mid-request */
} outcome;

static void mix(outcome *o, const void *ptr, size_t len)
{
  const unsigned char *s = ptr;
  size_t i;
  for (i = 0; i < len; i++) {
    o->digest ^= s[i];
    o->digest *= 1099511628211ULL; /* FNV-1a 64-bit prime */
  }
}

static void mix_tag(outcome *o, int tag) { mix(o, &tag, sizeof(tag)); }

static void mix_span(outcome *o, nw_span s)
{
  mix(o, &s.len, sizeof(s.len));
  if (s.len) mix(o, s.ptr, s.len);
}

static int cb_request_line(void *data, const nw_request_line *rl)
{
  outcome *o = data;
  mix_tag(o, EV_LINE);
  mix_span(o, rl->method);
  mix_span(o, rl->target);
  mix_span(o, rl->scheme);
  mix_span(o, rl->host);
  mix_span(o, rl->port);
  mix_span(o, rl->path);
  mix_span(o, rl->query);
  mix(o, &rl->has_query, sizeof(rl->has_query));
  mix(o, &rl->form, sizeof(rl->form));
  mix(o, &rl->http_minor, sizeof(rl->http_minor));
  return 0;
}

static int cb_host(void *data, nw_span host, nw_span port)
{
  outcome *o = data;
  mix_tag(o, EV_HOST);
  mix_span(o, host);
  mix_span(o, port);
  return 0;
}

static int cb_field(void *data, int id, nw_span name, nw_span value, int trailer)
{
  outcome *o = data;
  mix_tag(o, EV_FIELD);
  mix(o, &id, sizeof(id));
  mix_span(o, name);
  mix_span(o, value);
  mix(o, &trailer, sizeof(trailer));
  return 0;
}

static int cb_headers_complete(void *data)
{
  mix_tag(data, EV_DONE);
  return 0;
}

/* Body bytes are digested without their boundaries: those differ by design. */
static int cb_body(void *data, const char *ptr, size_t len)
{
  mix(data, ptr, len);
  return 0;
}

static const nw_callbacks callbacks = {
  cb_request_line, cb_host, cb_field, cb_headers_complete, cb_body
};

typedef struct {
  nw_parser p;
  outcome *o;
  char *buf;
  size_t len, off;
  int in_body;          /* 0 head, 1 fixed length, 2 chunked */
  uint64_t remaining;   /* fixed-length body bytes still due */
  int failed;
} session;

static void end_request(session *s)
{
  mix_tag(s->o, EV_END);
  mix(s->o, &s->p.flags, sizeof(s->p.flags));
  mix(s->o, &s->p.content_length, sizeof(s->p.content_length));
  s->o->requests++;
  nw_parser_reset(&s->p);
  s->in_body = 0;
}

/* Parses everything buffered, as the server's connection loop does. */
static void drain(session *s)
{
  while (!s->failed && s->off < s->len) {
    size_t r;
    if (s->in_body == 0) {
      r = nw_parse_head(&s->p, s->buf, s->len, s->off);
      if (r == NW_PARSE_ERROR) break;
      s->off = r;
      if (s->p.state == NW_S_REQUEST_LINE || s->p.state == NW_S_HEADERS) return;
      if (s->p.flags & NW_F_CHUNKED) {
        s->in_body = 2;
      } else if (s->p.content_length > 0) {
        s->in_body = 1;
        s->remaining = s->p.content_length;
      } else {
        end_request(s);
      }
    } else if (s->in_body == 1) {
      size_t n = s->len - s->off;
      if (n > s->remaining) n = (size_t)s->remaining;
      cb_body(s->o, s->buf + s->off, n);
      s->off += n;
      s->remaining -= n;
      if (s->remaining == 0) end_request(s);
    } else {
      r = nw_parse_chunked(&s->p, s->buf, s->len, s->off);
      if (r == NW_PARSE_ERROR) break;
      s->off = r;
      if (s->p.state != NW_S_BODY_DONE) return;
      end_request(s);
    }
  }
  if (s->p.state == NW_S_ERROR && !s->failed) {
    s->failed = 1;
    s->o->status = s->p.error;
    mix_tag(s->o, EV_STATUS);
  }
}

static void feed(session *s, const uint8_t *data, size_t n)
{
  /* keep only the unconsumed tail, then append: what the server does */
  memmove(s->buf, s->buf + s->off, s->len - s->off);
  s->len -= s->off;
  s->off = 0;
  memcpy(s->buf + s->len, data, n);
  s->len += n;
  drain(s);
}

static void session_open(session *s, outcome *o, size_t size)
{
  memset(s, 0, sizeof(*s));
  o->digest = 14695981039346656037ULL; /* FNV-1a 64-bit offset basis */
  o->requests = 0;
  o->status = 0;
  nw_parser_init(&s->p, &callbacks, o);
  s->p.max_request_line = FUZZ_MAX_REQUEST_LINE;
  s->p.max_header_size = FUZZ_MAX_HEADER_SIZE;
  s->p.max_header_fields = FUZZ_MAX_HEADER_FIELDS;
  s->p.max_body_size = FUZZ_MAX_BODY;
  s->o = o;
  s->buf = malloc(size + 1);
  if (!s->buf) abort();
}

/* Feeds data in pieces of `piece` bytes, the first one `first` bytes long. */
static outcome run(const uint8_t *data, size_t size, size_t first, size_t piece)
{
  outcome o;
  session s;
  size_t at = 0, n = first;

  session_open(&s, &o, size);
  while (at < size && !s.failed) {
    if (n > size - at) n = size - at;
    feed(&s, data + at, n);
    at += n;
    n = piece;
  }
  free(s.buf);
  return o;
}

static void compare(const outcome *a, const outcome *b, const char *how)
{
  if (a->digest == b->digest && a->requests == b->requests && a->status == b->status) return;
  fprintf(stderr, "parser disagrees (%s): whole status=%d requests=%u, other status=%d requests=%u\n",
          how, a->status, a->requests, b->status, b->requests);
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  outcome whole, split, bytewise;
  size_t first;

  if (size == 0 || size > FUZZ_MAX_INPUT) return 0;
  whole = run(data, size, size, size);
  /* split in two: the first piece's length comes from the data itself */
  first = 1 + (size_t)data[0] * 7 % size;
  split = run(data, size, first, size);
  compare(&whole, &split, "split in two");
  bytewise = run(data, size, 1, 1);
  compare(&whole, &bytewise, "byte at a time");
  return 0;
}
