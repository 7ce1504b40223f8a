/*
 * One replay of a byte stream through the request parser, and its record.
 * See replay.h.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"

/* How much of each record to print when replays disagree. */
#define FUZZ_SHOW 6000

/* ---- a growable text buffer ---- */

static void text_put(text *t, const void *p, size_t n)
{
  if (t->len + n + 1 > t->cap) {
    size_t cap = t->cap ? t->cap : 256;
    while (t->len + n + 1 > cap) cap *= 2;
    t->ptr = realloc(t->ptr, cap);
    if (!t->ptr) abort();
    t->cap = cap;
  }
  memcpy(t->ptr + t->len, p, n);
  t->len += n;
  t->ptr[t->len] = '\0';
}

__attribute__((format(printf, 2, 3)))
static void text_printf(text *t, const char *fmt, ...)
{
  char tmp[256];
  va_list ap;
  int n;
  va_start(ap, fmt);
  n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof(tmp)) abort();
  text_put(t, tmp, (size_t)n);
}

/* Bytes, printable ASCII as is and everything else as \xNN. */
static void text_bytes(text *t, const char *p, size_t n)
{
  static const char hex[] = "0123456789abcdef";
  size_t i;
  for (i = 0; i < n; i++) {
    unsigned char c = (unsigned char)p[i];
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"') {
      text_put(t, &c, 1);
    } else {
      char e[4] = { '\\', 'x', hex[c >> 4], hex[c & 15] };
      text_put(t, e, 4);
    }
  }
}

static void text_free(text *t)
{
  free(t->ptr);
  memset(t, 0, sizeof(*t));
}

/* ---- one replay: the parser's callbacks ---- */

static void fatal(const char *what, const char *detail)
{
  fprintf(stderr, "fuzz: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  abort();
}

static int is_tchar(unsigned char c)
{
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* The span must point into the buffer the parser was given. */
static void check_span(const replay *s, nw_span sp, const char *what)
{
  if (sp.len == 0) return;
  if (!sp.ptr || sp.ptr < s->buf || sp.len > s->len ||
      sp.ptr + sp.len > s->buf + s->len)
    fatal("span outside the buffer", what);
}

static void check_token(nw_span sp, const char *what)
{
  size_t i;
  if (sp.len == 0) fatal("empty token", what);
  for (i = 0; i < sp.len; i++)
    if (!is_tchar((unsigned char)sp.ptr[i])) fatal("not a token", what);
}

static void check_value(nw_span sp, const char *what)
{
  size_t i;
  for (i = 0; i < sp.len; i++) {
    unsigned char c = (unsigned char)sp.ptr[i];
    if ((c < 0x20 && c != '\t') || c == 0x7f) fatal("control byte in value", what);
  }
  if (sp.len && (sp.ptr[0] == ' ' || sp.ptr[0] == '\t' ||
                 sp.ptr[sp.len - 1] == ' ' || sp.ptr[sp.len - 1] == '\t'))
    fatal("value not trimmed", what);
}

static void log_span(replay *s, const char *label, nw_span sp)
{
  text_printf(&s->log, " %s=\"", label);
  if (sp.len) text_bytes(&s->log, sp.ptr, sp.len);
  text_put(&s->log, "\"", 1);
}

static int cb_request_line(void *data, const nw_request_line *rl)
{
  replay *s = data;
  size_t i;
  check_span(s, rl->method, "method");
  check_span(s, rl->target, "target");
  check_span(s, rl->scheme, "scheme");
  check_span(s, rl->host, "host");
  check_span(s, rl->port, "port");
  check_span(s, rl->path, "path");
  check_span(s, rl->query, "query");
  check_token(rl->method, "method");
  if (rl->target.len == 0) fatal("empty target", NULL);
  for (i = 0; i < rl->target.len; i++) {
    unsigned char c = (unsigned char)rl->target.ptr[i];
    if (c <= 0x20 || c == 0x7f) fatal("SP or control byte in target", NULL);
  }
  if (rl->http_minor != 0 && rl->http_minor != 1) fatal("bad http_minor", NULL);
  if (rl->form < NW_FORM_ORIGIN || rl->form > NW_FORM_ASTERISK) fatal("bad form", NULL);

  text_printf(&s->log, "LINE form=%d minor=%d has_query=%d", rl->form, rl->http_minor,
              rl->has_query);
  log_span(s, "method", rl->method);
  log_span(s, "target", rl->target);
  log_span(s, "scheme", rl->scheme);
  log_span(s, "host", rl->host);
  log_span(s, "port", rl->port);
  log_span(s, "path", rl->path);
  log_span(s, "query", rl->query);
  text_put(&s->log, "\n", 1);
  return 0;
}

static int cb_host(void *data, nw_span host, nw_span port)
{
  replay *s = data;
  size_t i;
  check_span(s, host, "Host host");
  check_span(s, port, "Host port");
  for (i = 0; i < port.len; i++)
    if (port.ptr[i] < '0' || port.ptr[i] > '9') fatal("non-digit in port", NULL);
  text_printf(&s->log, "HOST");
  log_span(s, "host", host);
  log_span(s, "port", port);
  text_put(&s->log, "\n", 1);
  return 0;
}

static int cb_field(void *data, int id, nw_span name, nw_span value, int trailer)
{
  replay *s = data;
  check_span(s, name, "field name");
  check_span(s, value, "field value");
  check_token(name, "field name");
  check_value(value, "field value");
  text_printf(&s->log, "%s id=%d", trailer ? "TRAILER" : "FIELD", id);
  log_span(s, "name", name);
  log_span(s, "value", value);
  text_put(&s->log, "\n", 1);
  return 0;
}

static int cb_headers_complete(void *data)
{
  replay *s = data;
  text_printf(&s->log, "HEAD_DONE flags=%#x\n", s->p.flags);
  return 0;
}

/* Body bytes are collected without their boundaries: those differ by design. */
static int cb_body(void *data, const char *ptr, size_t len)
{
  replay *s = data;
  nw_span sp = { ptr, len };
  if (len == 0) fatal("empty body callback", NULL);
  check_span(s, sp, "body");
  text_put(&s->body, ptr, len);
  if (s->body.len > FUZZ_MAX_BODY) fatal("body over max_body_size", NULL);
  return 0;
}

static const nw_callbacks callbacks = {
  cb_request_line, cb_host, cb_field, cb_headers_complete, cb_body
};

static void log_body(replay *s, const char *label)
{
  text_printf(&s->log, "%s[%zu]=\"", label, s->body.len);
  if (s->body.len) text_bytes(&s->log, s->body.ptr, s->body.len);
  text_put(&s->log, "\"\n", 2);
  s->body.len = 0;
}

static void end_request(replay *s)
{
  const nw_parser *p = &s->p;
  text_printf(&s->log, "END content_length=%llu has_cl=%d chunked=%d te=%d close=%d "
              "keepalive=%d expect=%d minor=%d keep_alive=%d",
              (unsigned long long)p->content_length, !!(p->flags & NW_F_CONTENT_LENGTH),
              !!(p->flags & NW_F_CHUNKED), !!(p->flags & NW_F_TRANSFER_ENC),
              !!(p->flags & NW_F_CONN_CLOSE), !!(p->flags & NW_F_CONN_KEEPALIVE),
              !!(p->flags & NW_F_EXPECT_CONTINUE), p->http_minor, nw_keep_alive(p));
  log_body(s, " body");
  s->requests++;
  nw_parser_reset(&s->p);
  s->in_body = 0;
}

static void check_return(replay *s, size_t r)
{
  if (r == NW_PARSE_ERROR) {
    if (s->p.state != NW_S_ERROR) fatal("error returned, state not NW_S_ERROR", NULL);
    return;
  }
  if (s->p.state == NW_S_ERROR) fatal("NW_S_ERROR without NW_PARSE_ERROR", NULL);
  if (r < s->off || r > s->len) fatal("offset out of range", NULL);
}

/* ---- the buffer ---- */

/* The buffer's bytes from `from` on, plus n more, in a new allocation. */
static void move_buffer(replay *s, size_t from, const uint8_t *data, size_t n)
{
  size_t keep = s->len - from;
  char *buf = malloc(keep + n + 1); /* + 1: never malloc(0) */
  if (!buf) abort();
  if (keep) memcpy(buf, s->buf + from, keep);
  if (n) memcpy(buf + keep, data, n);
  free(s->buf);
  s->buf = buf;
  s->len = keep + n;
  s->off -= from;
}

void replay_compact(replay *s)
{
  if (s->how == REPLAY_CONNECTION) {
    move_buffer(s, s->off, NULL, 0);
    return;
  }
  memmove(s->buf, s->buf + s->off, s->len - s->off);
  s->len -= s->off;
  s->off = 0;
}

/*
 * Connection#discard_consumed: what is consumed goes, unless that is all
 * of it (the next read then replaces the bytes).
 */
static void discard_consumed(replay *s)
{
  if (s->how != REPLAY_CONNECTION || s->off == 0 || s->off >= s->len) return;
  replay_compact(s);
}

/* ---- the connection's loop ---- */

static void complete_request(replay *s)
{
  discard_consumed(s);
  end_request(s);
}

/* Validates the head the parser just finished and starts the body. */
static void start_body(replay *s)
{
  if (s->p.state != NW_S_HEAD_DONE && s->p.state != NW_S_CHUNK_SIZE)
    fatal("unexpected state after the head", NULL);
  if (((s->p.flags & NW_F_CHUNKED) != 0) != (s->p.state == NW_S_CHUNK_SIZE))
    fatal("chunked flag and state disagree", NULL);
  if ((s->p.flags & NW_F_CHUNKED) && (s->p.flags & NW_F_CONTENT_LENGTH))
    fatal("both chunked and Content-Length accepted", NULL);
  if (s->p.content_length > FUZZ_MAX_BODY) fatal("Content-Length over the limit accepted", NULL);
  if (s->p.flags & NW_F_CHUNKED) {
    s->in_body = 2;
  } else if (s->p.content_length > 0) {
    s->in_body = 1;
    s->remaining = s->p.content_length;
  } else {
    complete_request(s);
  }
}

/* Request::Input#take for a Content-Length body; 1 when the body is complete. */
static int take_body(replay *s)
{
  size_t n = s->len - s->off;
  if (n > s->remaining) n = (size_t)s->remaining;
  text_put(&s->body, s->buf + s->off, n);
  s->off += n;
  s->remaining -= n;
  return s->remaining == 0;
}

/*
 * Parses everything buffered, as Connection#process does: the head, the
 * body, then the next pipelined request; 0 when it needs more bytes.
 */
static int step(replay *s)
{
  size_t r;
  if (s->in_body == 0) {
    r = nw_parse_head(&s->p, s->buf, s->len, s->off);
    check_return(s, r);
    if (r == NW_PARSE_ERROR) return 0;
    s->off = r;
    if (s->p.state == NW_S_REQUEST_LINE || s->p.state == NW_S_HEADERS) {
      if (s->off != s->len && s->p.scanned != s->len - s->off)
        fatal("head stopped before the end of a complete line", NULL);
      return 0;
    }
    start_body(s);
    return 1;
  }
  if (s->in_body == 1) {
    if (take_body(s)) complete_request(s);
    else discard_consumed(s);
    return 1;
  }
  r = nw_parse_chunked(&s->p, s->buf, s->len, s->off);
  check_return(s, r);
  if (r == NW_PARSE_ERROR) return 0;
  s->off = r;
  if (s->p.state != NW_S_BODY_DONE) {
    /* a read ending inside a chunk-size line leaves it unconsumed */
    discard_consumed(s);
    return 0;
  }
  complete_request(s);
  return 1;
}

static void drain(replay *s)
{
  while (!s->failed && s->off < s->len && step(s)) {
  }
  if (s->p.state == NW_S_ERROR && !s->failed) {
    int e = s->p.error;
    if (e != 400 && e != 413 && e != 414 && e != 417 && e != 431 && e != 505)
      fatal("unknown error status", NULL);
    s->failed = 1;
  }
}

/* ---- a replay ---- */

void replay_start(replay *s, enum replay_buffer how, size_t size)
{
  memset(s, 0, sizeof(*s));
  nw_parser_init(&s->p, &callbacks, s);
  s->p.max_request_line = FUZZ_MAX_REQUEST_LINE;
  s->p.max_header_size = FUZZ_MAX_HEADER_SIZE;
  s->p.max_header_fields = FUZZ_MAX_HEADER_FIELDS;
  s->p.max_body_size = FUZZ_MAX_BODY;
  s->how = how;
  s->cap = size;
  /* the connection's buffer is made by its reads */
  s->buf = how == REPLAY_CONNECTION ? NULL : malloc(size + 1);
  if (how != REPLAY_CONNECTION && !s->buf) abort();
}

void replay_read(replay *s, const uint8_t *data, size_t n)
{
  if (s->failed || n == 0) return;
  if (s->how == REPLAY_CONNECTION) {
    /* into the buffer when all was consumed, else appended (@rbuf) */
    move_buffer(s, s->off >= s->len ? s->len : 0, data, n);
  } else {
    if (s->how == REPLAY_COMPACT) replay_compact(s);
    if (s->len + n > s->cap) fatal("read past the replay's size", NULL);
    memcpy(s->buf + s->len, data, n);
    s->len += n;
  }
  drain(s);
}

replay_outcome replay_finish(replay *s)
{
  replay_outcome o;
  text_printf(&s->log, "EOF status=%d requests=%u", s->failed ? s->p.error : 0, s->requests);
  if (!s->failed) {
    /* where a clean run stopped must not depend on the reads either */
    text_printf(&s->log, " state=%d in_body=%d unconsumed=%zu", s->p.state, s->in_body,
                s->len - s->off);
  }
  log_body(s, " partial_body");

  o.log = s->log;
  o.requests = s->requests;
  o.status = s->failed ? s->p.error : 0;
  text_free(&s->body);
  free(s->buf);
  memset(s, 0, sizeof(*s));
  return o;
}

int replay_same(const replay_outcome *a, const replay_outcome *b)
{
  return a->status == b->status && a->requests == b->requests && a->log.len == b->log.len &&
         (a->log.len == 0 || memcmp(a->log.ptr, b->log.ptr, a->log.len) == 0);
}

void replay_show(const char *label, const replay_outcome *o)
{
  fprintf(stderr, "---- %s: status=%d requests=%u (%zu bytes of record) ----\n%.*s\n", label,
          o->status, o->requests, o->log.len,
          (int)(o->log.len < FUZZ_SHOW ? o->log.len : FUZZ_SHOW), o->log.ptr ? o->log.ptr : "");
}

void replay_outcome_free(replay_outcome *o)
{
  text_free(&o->log);
}

__attribute__((no_sanitize("unsigned-integer-overflow")))
uint64_t fuzz_hash(const uint8_t *data, size_t size)
{
  uint64_t h = 14695981039346656037ULL; /* FNV-1a */
  size_t i;
  for (i = 0; i < size; i++) h = (h ^ data[i]) * 1099511628211ULL;
  return h;
}
