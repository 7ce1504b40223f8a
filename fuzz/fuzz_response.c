/*
 * libFuzzer target for the response head writer (ext/narwhal_http/response.c,
 * Narwhal::ResponseHead#write), run in an embedded Ruby: the writer takes
 * Ruby values (a Hash of headers, an Array body), so it is called as the
 * server calls it.
 *
 * The input is a request's flags, a status, a body hint and headers:
 *
 *   byte 0       bits 0-2: REQ_HTTP11, REQ_KEEPALIVE, REQ_HEAD;
 *                bits 3-4: the body hint: nil, an Integer (bytes 3-4), an
 *                Array of Strings (the body section), an Array holding a
 *                non-String; bit 5: a keep-alive line is configured;
 *                bit 6: the status is given as a String; bit 7: the head
 *                has a LoadReport (orca_load_report), of an idle scoreboard
 *   bytes 1-2    the status: a 16-bit number modulo 1100 (so also < 100 and
 *                > 999)
 *   bytes 3-4    the Integer hint
 *   then         headers, until a 0xff byte or the end: a byte whose low 6
 *                bits are the name's length (bit 6: the value is an Array,
 *                its elements split at 0xfe; bit 7: the value is an
 *                Integer, not a String), the name, a byte with the value's
 *                length, the value
 *   the rest     after 0xff: the body section, split at 0xfe into Strings
 *
 * #write may raise (any StandardError is answered 500 by the Responder).
 * When it returns, what it wrote must be a response a client reads one way
 * only: a status line, then lines of "name: value" with a token name and no
 * CR, LF or other control byte in the value, then an empty line; at most one
 * Content-Length, never beside Transfer-Encoding, none in 1xx and 204; the
 * body bytes after the head only for an Array body written whole, matching
 * Content-Length; Connection: close exactly when the connection is not kept;
 * a kept connection only with a body that carries its end; the report's
 * endpoint-load-metrics line exactly once in a final response with a
 * report whose app set no load report field of its own, else never. Any other outcome
 * prints the input as Ruby values and the bytes written, and aborts.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../ext/narwhal_http/narwhal_http.h"

#define REQ_HTTP11 1
#define REQ_KEEPALIVE 2
#define REQ_HEAD 4
#define MODE_DONE 0
#define MODE_LENGTH 1
#define MODE_CHUNKED 2
#define MODE_RAW 3
#define MODE_CLOSE 4
#define MODE_HIJACK 5

#define FLAGS_MASK 7
#define HINT_SHIFT 3
#define HINT_MASK 3
#define HINT_NIL 0
#define HINT_INTEGER 1
#define HINT_STRINGS 2
#define HINT_NOT_STRINGS 3
#define KEEP_ALIVE_LINE_BIT 0x20
#define STATUS_STRING_BIT 0x40
#define LOAD_REPORT_BIT 0x80
#define STATUS_RANGE 1100
#define PREFIX_LEN 5
#define NAME_LEN_MASK 0x3f
#define VALUE_ARRAY_BIT 0x40
#define VALUE_INTEGER_BIT 0x80
#define END_OF_HEADERS 0xff
#define SPLIT_BYTE 0xfe
#define MAX_BUF_SHOWN 4000
#define STATUS_LINE_LEN 13 /* "HTTP/1.1 200 " */
#define INLINE_BODY_MAX (16 * 1024)

VALUE nw_mNarwhal;

static VALUE head_class, keep_alive_line, load_report, keep; /* keep: this input's objects, safe from GC */
/* What the report of an idle scoreboard always says (no request, no queue) */
static const char report_line[] =
  "endpoint-load-metrics: TEXT application_utilization=0.000000, rps_fractional=0.000, named_metrics.queue=0";
static ID id_write, id_keepalive_p, id_content_length, id_inspect;

int LLVMFuzzerInitialize(int *argc, char ***argv);

/*
 * ruby_init takes these over. Given back, a crash reaches AddressSanitizer
 * and libFuzzer (which then writes the reproducer), and libFuzzer's
 * -timeout alarm and -max_total_time reach libFuzzer: under Ruby's
 * handlers they became a SignalException raised wherever the next input
 * happened to be.
 */
static const int given_back[] = {
  SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGALRM, SIGINT, SIGTERM, SIGHUP, SIGQUIT,
  SIGUSR1, SIGUSR2, SIGXFSZ, SIGPIPE
};
#define GIVEN_BACK (sizeof(given_back) / sizeof(given_back[0]))

/* A LoadReport of a one-slot scoreboard nothing serves through. */
static VALUE idle_load_report(void)
{
  VALUE board = rb_obj_alloc(rb_const_get(nw_mNarwhal, rb_intern("Scoreboard"))), args[3];
  rb_funcall(board, rb_intern("map_shared"), 2, INT2FIX(1), INT2FIX(1)); /* Scoreboard.new's work */
  args[0] = board;
  args[1] = INT2FIX(0);
  args[2] = INT2FIX(1);
  return rb_class_new_instance(3, args, rb_const_get(nw_mNarwhal, rb_intern("LoadReport")));
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  struct sigaction before[GIVEN_BACK];
  size_t i;

  (void)argc;
  (void)argv;
  for (i = 0; i < GIVEN_BACK; i++) sigaction(given_back[i], NULL, &before[i]);
  ruby_init();
  for (i = 0; i < GIVEN_BACK; i++) sigaction(given_back[i], &before[i], NULL);
  nw_mNarwhal = rb_define_module("Narwhal");
  nw_init_response();
  nw_init_scoreboard();
  nw_init_load_report();
  head_class = rb_const_get(nw_mNarwhal, rb_intern("ResponseHead"));
  keep_alive_line = rb_str_new_cstr("keep-alive: timeout=5\r\n");
  load_report = idle_load_report();
  keep = rb_ary_new();
  rb_gc_register_address(&keep_alive_line);
  rb_gc_register_address(&load_report);
  rb_gc_register_address(&keep);
  id_write = rb_intern("write");
  id_keepalive_p = rb_intern("keepalive?");
  id_content_length = rb_intern("content_length");
  id_inspect = rb_intern("inspect");
  return 0;
}

static VALUE kept(VALUE v)
{
  rb_ary_push(keep, v);
  return v;
}

/* Bytes as Strings, one per piece between SPLIT_BYTEs. */
static VALUE split_strings(const uint8_t *p, size_t n)
{
  VALUE ary = kept(rb_ary_new());
  size_t i, start = 0;
  for (i = 0; i <= n; i++) {
    if (i == n || p[i] == SPLIT_BYTE) {
      rb_ary_push(ary, rb_str_new((const char *)p + start, (long)(i - start)));
      start = i + 1;
    }
  }
  return ary;
}

/* Reads the headers; returns where the body section starts. */
static size_t read_headers(VALUE headers, const uint8_t *data, size_t size, size_t at)
{
  while (at < size && data[at] != END_OF_HEADERS) {
    uint8_t kind = data[at++];
    size_t name_len = kind & NAME_LEN_MASK, value_len;
    VALUE name, value;
    if (at + name_len >= size) return size;
    name = rb_str_new((const char *)data + at, (long)name_len);
    at += name_len;
    value_len = data[at++];
    if (value_len > size - at) value_len = size - at;
    if (kind & VALUE_INTEGER_BIT) value = INT2FIX(1);
    else if (kind & VALUE_ARRAY_BIT) value = split_strings(data + at, value_len);
    else value = rb_str_new((const char *)data + at, (long)value_len);
    at += value_len;
    rb_hash_aset(headers, name, value);
  }
  return at < size ? at + 1 : size;
}

typedef struct {
  VALUE head, buf, status, headers, hint;
  int flags;
  int line_given; /* the head was made with a keep-alive line */
  int report_given; /* ... with a LoadReport */
  VALUE mode, keepalive, content_length;
} call;

static VALUE do_write(VALUE arg)
{
  call *c = (call *)arg;
  c->mode = rb_funcall(c->head, id_write, 5, c->buf, c->status, c->headers, c->hint, INT2FIX(c->flags));
  c->keepalive = rb_funcall(c->head, id_keepalive_p, 0);
  c->content_length = rb_funcall(c->head, id_content_length, 0);
  return Qnil;
}

static void show_value(const char *label, VALUE v)
{
  VALUE s = rb_funcall(v, id_inspect, 0);
  fprintf(stderr, "%s: %.*s\n", label, (int)RSTRING_LEN(s), RSTRING_PTR(s));
}

static void fail(const call *c, const char *what)
{
  long n = RB_TYPE_P(c->buf, T_STRING) ? RSTRING_LEN(c->buf) : 0;
  fprintf(stderr, "fuzz_response: %s\n", what);
  if (!NIL_P(rb_errinfo())) show_value("raised", rb_errinfo());
  show_value("status", c->status);
  show_value("headers", c->headers);
  show_value("body hint", c->hint);
  fprintf(stderr, "flags: %d, mode: %ld, keepalive?: %s\nwritten (%ld bytes):\n%.*s\n", c->flags,
          FIXNUM_P(c->mode) ? FIX2LONG(c->mode) : -1L, RTEST(c->keepalive) ? "true" : "false", n,
          (int)(n < MAX_BUF_SHOWN ? n : MAX_BUF_SHOWN), n ? RSTRING_PTR(c->buf) : "");
  abort();
}

static int is_tchar(unsigned char c)
{
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static int name_is(const char *p, size_t n, const char *lit)
{
  return n == strlen(lit) && strncasecmp(p, lit, n) == 0;
}

/* What the head says, read as a client reads it. */
typedef struct {
  int code;
  int content_lengths, transfer_encodings, connections, keep_alives;
  long content_length; /* -1 when none */
  int connection_close, connection_keep_alive;
  int chunked;      /* the last transfer-encoding line is "chunked" */
  int ends_chunked; /* the last coding of the last one is chunked */
  int server_reports; /* lines that are the load report's (report_line) */
  size_t body_at;
} head_read;

static long digits_value(const call *c, const char *p, size_t n)
{
  long x = 0;
  size_t i;
  if (n == 0) fail(c, "empty content-length");
  for (i = 0; i < n; i++) {
    if (p[i] < '0' || p[i] > '9' || x > (LONG_MAX - 9) / 10) fail(c, "content-length not a number");
    x = x * 10 + (p[i] - '0');
  }
  return x;
}

/* RFC 9112 6.1: a comma-separated list, OWS around the commas. */
static int last_coding_is_chunked(const char *p, size_t n)
{
  size_t start;
  while (n && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
  start = n;
  while (start && p[start - 1] != ',') start--;
  while (start < n && (p[start] == ' ' || p[start] == '\t')) start++;
  return name_is(p + start, n - start, "chunked");
}

static void read_field(const call *c, head_read *r, const char *p, size_t n)
{
  const char *colon = memchr(p, ':', n);
  size_t name_len, i;
  const char *value;
  size_t value_len;
  if (!colon || colon == p) fail(c, "a header line without a name");
  name_len = (size_t)(colon - p);
  for (i = 0; i < name_len; i++)
    if (!is_tchar((unsigned char)p[i])) fail(c, "a header name that is not a token");
  if (name_len + 1 >= n || colon[1] != ' ') fail(c, "no \": \" after a header name");
  value = colon + 2;
  value_len = n - name_len - 2;
  for (i = 0; i < value_len; i++) {
    unsigned char b = (unsigned char)value[i];
    if ((b < ' ' && b != '\t') || b == 0x7f) fail(c, "a control byte in a header value");
  }
  if (name_is(p, name_len, "content-length")) {
    r->content_lengths++;
    r->content_length = digits_value(c, value, value_len);
  } else if (name_is(p, name_len, "transfer-encoding")) {
    r->transfer_encodings++;
    r->chunked = name_is(value, value_len, "chunked");
    r->ends_chunked = last_coding_is_chunked(value, value_len);
  } else if (name_is(p, name_len, "connection")) {
    r->connections++;
    r->connection_close = name_is(value, value_len, "close");
    r->connection_keep_alive = name_is(value, value_len, "keep-alive");
  } else if (name_is(p, name_len, "keep-alive")) {
    r->keep_alives++;
  }
  if (n == sizeof(report_line) - 1 && memcmp(p, report_line, n) == 0) r->server_reports++;
}

static head_read read_head(const call *c)
{
  const char *buf = RSTRING_PTR(c->buf), *p, *eol;
  size_t len = (size_t)RSTRING_LEN(c->buf), i;
  head_read r;

  memset(&r, 0, sizeof(r));
  r.content_length = -1;
  if (len < STATUS_LINE_LEN || memcmp(buf, "HTTP/1.1 ", 9) != 0 || buf[12] != ' ')
    fail(c, "no status line");
  for (i = 9; i < 12; i++) {
    if (buf[i] < '0' || buf[i] > '9') fail(c, "a status that is not 3 digits");
    r.code = r.code * 10 + (buf[i] - '0');
  }
  if (r.code < 100) fail(c, "a status below 100");
  p = buf;
  for (;;) {
    size_t n;
    eol = memchr(p, '\n', len - (size_t)(p - buf));
    if (!eol) fail(c, "the head does not end");
    if (eol == p || eol[-1] != '\r') fail(c, "a bare LF");
    n = (size_t)(eol - 1 - p);
    if (memchr(p, '\r', n)) fail(c, "a bare CR");
    if (p != buf) {
      if (n == 0) break;
      read_field(c, &r, p, n);
    } else {
      for (i = STATUS_LINE_LEN; i < n; i++)
        if ((unsigned char)p[i] < ' ' || p[i] == 0x7f) fail(c, "a control byte in the reason phrase");
    }
    p = eol + 1;
  }
  r.body_at = (size_t)(eol + 1 - buf);
  return r;
}

/* The body bytes written after the head are exactly the Array's. */
static void check_inline_body(const call *c, const head_read *r)
{
  const char *body = RSTRING_PTR(c->buf) + r->body_at;
  size_t n = (size_t)RSTRING_LEN(c->buf) - r->body_at, at = 0;
  long i;
  for (i = 0; i < RARRAY_LEN(c->hint); i++) {
    VALUE part = RARRAY_AREF(c->hint, i);
    size_t m = (size_t)RSTRING_LEN(part);
    if (at + m > n || memcmp(body + at, RSTRING_PTR(part), m) != 0) fail(c, "the body written is not the body");
    at += m;
  }
  if (at != n) fail(c, "bytes after the body");
  if (r->content_length != (long)n) fail(c, "the body written and its content-length differ");
}

static void check_framing(const call *c, const head_read *r, int mode)
{
  int no_body = r->code < 200 || r->code == 204 || r->code == 304;
  int head = (c->flags & REQ_HEAD) != 0;
  int inline_body = mode == MODE_DONE && !no_body && !head && RB_TYPE_P(c->hint, T_ARRAY);

  if (r->content_lengths > 1) fail(c, "more than one content-length");
  if (r->content_lengths && r->transfer_encodings) fail(c, "content-length beside transfer-encoding");
  if ((r->code < 200 || r->code == 204) && (r->content_lengths || r->transfer_encodings))
    fail(c, "a 1xx or 204 that announces a body");
  if (inline_body) check_inline_body(c, r);
  else if ((size_t)RSTRING_LEN(c->buf) != r->body_at) fail(c, "bytes after the head");

  switch (mode) {
  case MODE_DONE:
    if (!no_body && !head && r->content_lengths == 0) fail(c, "a whole response without its length");
    break;
  case MODE_LENGTH:
    if (r->content_length < 0 || NUM2LONG(c->content_length) != r->content_length)
      fail(c, "LENGTH without a content-length, or another one");
    break;
  case MODE_CHUNKED:
    if (!r->chunked || !(c->flags & REQ_HTTP11)) fail(c, "CHUNKED without transfer-encoding: chunked");
    break;
  case MODE_RAW:
    if (!r->transfer_encodings) fail(c, "RAW without the app's transfer-encoding");
    if (RTEST(c->keepalive) && !r->ends_chunked)
      fail(c, "a kept connection whose transfer-encoding does not end in chunked");
    break;
  case MODE_CLOSE:
  case MODE_HIJACK:
    if (RTEST(c->keepalive)) fail(c, "a body ended by closing on a kept connection");
    break;
  default:
    fail(c, "unknown mode");
  }
}

/* The server says what becomes of the connection, and only that. */
static void check_connection(const call *c, const head_read *r, int mode)
{
  int keepalive = RTEST(c->keepalive);
  if (keepalive && !(c->flags & REQ_KEEPALIVE)) fail(c, "kept a connection the request does not keep");
  if (r->code == 101 || mode == MODE_HIJACK) return; /* the app's own Connection field */
  if (!keepalive) {
    if (r->connections != 1 || !r->connection_close) fail(c, "not kept, without one connection: close");
    if (r->keep_alives) fail(c, "keep-alive on a closing connection");
    return;
  }
  if (c->flags & REQ_HTTP11) {
    if (r->connections) fail(c, "a connection field on a kept HTTP/1.1 connection");
  } else if (r->connections != 1 || !r->connection_keep_alive) {
    fail(c, "a kept HTTP/1.0 connection without one connection: keep-alive");
  }
  if (r->keep_alives != c->line_given) fail(c, "a kept connection without the one keep-alive line");
}

static int is_report_name(VALUE key, VALUE value, VALUE arg)
{
  int *found = (int *)arg;
  if (RB_TYPE_P(key, T_STRING) &&
      (name_is(RSTRING_PTR(key), (size_t)RSTRING_LEN(key), "endpoint-load-metrics") ||
       name_is(RSTRING_PTR(key), (size_t)RSTRING_LEN(key), "endpoint-load-metrics-bin")))
    *found = 1;
  return ST_CONTINUE;
}

/* The server's load report: once in a final response of a head that has
 * one, unless the app gave a load report field (any case, even empty). */
static void check_load_report(const call *c, const head_read *r)
{
  int app_report = 0;
  rb_hash_foreach(c->headers, is_report_name, (VALUE)&app_report);
  if (r->server_reports != (c->report_given && r->code >= 200 && !app_report))
    fail(c, r->server_reports > 1 ? "the load report twice" : "the load report where it does not belong, or missing");
}

static VALUE body_hint(int kind, const uint8_t *data, size_t size, size_t body_at)
{
  switch (kind) {
  case HINT_INTEGER: return INT2FIX(data[3] << 8 | data[4]);
  case HINT_STRINGS: return split_strings(data + body_at, size - body_at);
  case HINT_NOT_STRINGS: return kept(rb_ary_new_from_args(2, rb_str_new_cstr("a"), INT2FIX(1)));
  default: return Qnil;
  }
}

typedef struct {
  const uint8_t *data;
  size_t size;
  call *c;
  int code;
} input;

/* The Ruby values of the input. */
static VALUE build(VALUE arg)
{
  input *in = (input *)arg;
  call *c = in->c;
  const uint8_t *data = in->data;
  size_t body_at;
  VALUE args[2];

  c->flags = data[0] & FLAGS_MASK;
  c->line_given = (data[0] & KEEP_ALIVE_LINE_BIT) != 0;
  c->report_given = (data[0] & LOAD_REPORT_BIT) != 0;
  args[0] = c->line_given ? keep_alive_line : Qnil;
  args[1] = c->report_given ? load_report : Qnil;
  c->head = kept(rb_class_new_instance(2, args, head_class));
  c->buf = kept(rb_str_new(NULL, 0));
  in->code = (data[1] << 8 | data[2]) % STATUS_RANGE;
  c->status = (data[0] & STATUS_STRING_BIT) ? kept(rb_sprintf("%d", in->code)) : INT2FIX(in->code);
  c->headers = kept(rb_hash_new());
  body_at = read_headers(c->headers, data, in->size, PREFIX_LEN);
  c->hint = body_hint((data[0] >> HINT_SHIFT) & HINT_MASK, data, in->size, body_at);
  return Qnil;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  call c;
  input in;
  int state, mode;
  head_read r;

  if (size < PREFIX_LEN) return 0;
  rb_ary_clear(keep);
  memset(&c, 0, sizeof(c));
  c.head = c.buf = c.status = c.headers = c.hint = c.mode = c.keepalive = c.content_length = Qnil;
  in.data = data;
  in.size = size;
  in.c = &c;
  rb_protect(build, (VALUE)&in, &state);
  if (state) fail(&c, "building the input raised");

  rb_protect(do_write, (VALUE)&c, &state);
  if (state) {
    VALUE error = rb_errinfo();
    rb_set_errinfo(Qnil);
    if (!rb_obj_is_kind_of(error, rb_eStandardError)) fail(&c, "raised something the Responder does not rescue");
    return 0;
  }
  if (in.code < 100 || in.code > 999) fail(&c, "wrote a status outside 100..999");
  mode = FIX2INT(c.mode);
  r = read_head(&c);
  if (r.code != in.code) fail(&c, "wrote another status");
  check_framing(&c, &r, mode);
  check_connection(&c, &r, mode);
  check_load_report(&c, &r);
  return 0;
}
