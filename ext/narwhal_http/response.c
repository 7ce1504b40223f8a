/*
 * Narwhal::ResponseHead: turns a Rack status and headers into the bytes of an
 * HTTP/1.1 response head, validating every header on the way, and decides
 * how the body is framed.
 */
#include "narwhal_http.h"
#include "parser.h" /* nw_tchar */
#include <strings.h>
#include <time.h>

/* request flags passed to #write */
#define REQ_HTTP11    1
#define REQ_KEEPALIVE 2
#define REQ_HEAD      4

/* what the caller must do with the body after writing the buffer: MODE_*
 * (narwhal_http.h, shared with the request loop) */

/* Array bodies up to this size are copied after the head: one write(2). */
#define INLINE_BODY_MAX (16 * 1024)
#define MIN_STATUS 100
#define MAX_STATUS 999
#define DATE_LEN 29 /* "Sun, 06 Nov 1994 08:49:37 GMT" */

static VALUE cResponseHead, eResponseError;

typedef struct {
  long content_length; /* -1 when unknown */
  int keepalive;
  VALUE hijack;
  VALUE keep_alive_line; /* "keep-alive: timeout=N\r\n" for kept-alive responses, or nil */
  VALUE load_report; /* a LoadReport: its line goes into the app's final responses; or nil */
} head_t;

static void head_mark(void *ptr)
{
  head_t *h = ptr;
  rb_gc_mark(h->hijack);
  rb_gc_mark(h->keep_alive_line);
  rb_gc_mark(h->load_report);
}
static size_t head_size(const void *ptr) { return sizeof(head_t); }

static const rb_data_type_t head_type = {
  "Narwhal::ResponseHead",
  { head_mark, RUBY_TYPED_DEFAULT_FREE, head_size, NULL, {0} },
  0, 0, RUBY_TYPED_FREE_IMMEDIATELY
};

static const char *reason_phrase(int code)
{
  switch (code) {
  case 100: return "Continue";
  case 101: return "Switching Protocols";
  case 102: return "Processing";
  case 103: return "Early Hints";
  case 200: return "OK";
  case 201: return "Created";
  case 202: return "Accepted";
  case 203: return "Non-Authoritative Information";
  case 204: return "No Content";
  case 205: return "Reset Content";
  case 206: return "Partial Content";
  case 207: return "Multi-Status";
  case 208: return "Already Reported";
  case 226: return "IM Used";
  case 300: return "Multiple Choices";
  case 301: return "Moved Permanently";
  case 302: return "Found";
  case 303: return "See Other";
  case 304: return "Not Modified";
  case 305: return "Use Proxy";
  case 307: return "Temporary Redirect";
  case 308: return "Permanent Redirect";
  case 400: return "Bad Request";
  case 401: return "Unauthorized";
  case 402: return "Payment Required";
  case 403: return "Forbidden";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 406: return "Not Acceptable";
  case 407: return "Proxy Authentication Required";
  case 408: return "Request Timeout";
  case 409: return "Conflict";
  case 410: return "Gone";
  case 411: return "Length Required";
  case 412: return "Precondition Failed";
  case 413: return "Content Too Large";
  case 414: return "URI Too Long";
  case 415: return "Unsupported Media Type";
  case 416: return "Range Not Satisfiable";
  case 417: return "Expectation Failed";
  case 421: return "Misdirected Request";
  case 422: return "Unprocessable Content";
  case 423: return "Locked";
  case 424: return "Failed Dependency";
  case 425: return "Too Early";
  case 426: return "Upgrade Required";
  case 428: return "Precondition Required";
  case 429: return "Too Many Requests";
  case 431: return "Request Header Fields Too Large";
  case 451: return "Unavailable For Legal Reasons";
  case 500: return "Internal Server Error";
  case 501: return "Not Implemented";
  case 502: return "Bad Gateway";
  case 503: return "Service Unavailable";
  case 504: return "Gateway Timeout";
  case 505: return "HTTP Version Not Supported";
  case 506: return "Variant Also Negotiates";
  case 507: return "Insufficient Storage";
  case 508: return "Loop Detected";
  case 511: return "Network Authentication Required";
  }
  return "";
}

/* IMF-fixdate, recomputed at most once a second (the GVL serialises us). */
static const char *http_date(void)
{
  static char buf[DATE_LEN + 1];
  static time_t cached = -1;
  time_t now = time(NULL);
  if (now != cached) {
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(buf, sizeof(buf), "%a, %d %b %Y %H:%M:%S GMT", &tm);
    cached = now;
  }
  return buf;
}

static int name_is(VALUE name, const char *lit, long n)
{
  long i;
  const char *p;
  if (RSTRING_LEN(name) != n) return 0;
  p = RSTRING_PTR(name);
  for (i = 0; i < n; i++) {
    char c = p[i];
    if (c >= 'A' && c <= 'Z') c = (char)(c + ('a' - 'A'));
    if (c != lit[i]) return 0;
  }
  return 1;
}

struct head_ctx {
  VALUE buf;
  head_t *h;
  int code;
  int has_date, has_te, conn_close, pass_connection;
  int te_chunked; /* the app's transfer-encoding ends in chunked */
  int app_report; /* the app sent a load report of its own (endpoint-load-metrics[-bin]) */
  long app_length; /* -1 when the app gave none */
  long cl_start, cl_end; /* where the app's content-length line is in buf */
};

#define CHUNKED_LEN 7

/*
 * Whether the last coding of a transfer-encoding value (a String, its
 * lines joined by "\n" in Rack 2, or an Array of them) is chunked: only
 * then does the body carry its own end (RFC 9112 6.3).
 */
static int ends_in_chunked(VALUE value)
{
  const char *p, *end;

  if (RB_TYPE_P(value, T_ARRAY)) {
    if (RARRAY_LEN(value) == 0) return 0;
    value = RARRAY_AREF(value, RARRAY_LEN(value) - 1);
  }
  if (!RB_TYPE_P(value, T_STRING)) return 0;
  p = RSTRING_PTR(value);
  end = p + RSTRING_LEN(value);
  while (end > p && (end[-1] == ' ' || end[-1] == '\t')) end--;
  if (end - p < CHUNKED_LEN || strncasecmp(end - CHUNKED_LEN, "chunked", CHUNKED_LEN) != 0) return 0;
  /* the whole last element of the list: "x chunked" is not chunked */
  end -= CHUNKED_LEN;
  while (end > p && (end[-1] == ' ' || end[-1] == '\t')) end--;
  return end == p || end[-1] == ',' || end[-1] == '\n';
}

static void check_name(VALUE name)
{
  long i, n = RSTRING_LEN(name);
  const unsigned char *p = (const unsigned char *)RSTRING_PTR(name);
  if (n == 0) rb_raise(eResponseError, "empty response header name");
  for (i = 0; i < n; i++)
    if (!nw_tchar[p[i]]) rb_raise(eResponseError, "invalid response header name %+"PRIsVALUE, name);
}

/*
 * Writes one "name: value" line per line of value: Rack 2 joins repeated
 * fields with "\n" (split), Rack 3 gives an Array whose elements must not
 * contain a line break at all.
 */
static void write_value(struct head_ctx *c, VALUE name, VALUE value, int split)
{
  const unsigned char *p, *start;
  long i, n;

  if (!RB_TYPE_P(value, T_STRING))
    rb_raise(eResponseError, "response header %+"PRIsVALUE" has a non-String value (%"PRIsVALUE")",
             name, rb_obj_class(value));
  p = (const unsigned char *)RSTRING_PTR(value);
  n = RSTRING_LEN(value);
  start = p;
  for (i = 0; i <= n; i++) {
    if (i == n || (p[i] == '\n' && split)) {
      rb_str_buf_cat(c->buf, RSTRING_PTR(name), RSTRING_LEN(name));
      rb_str_buf_cat(c->buf, ": ", 2);
      rb_str_buf_cat(c->buf, (const char *)start, (long)(p + i - start));
      rb_str_buf_cat(c->buf, "\r\n", 2);
      start = p + i + 1;
    } else if ((p[i] < ' ' && p[i] != '\t') || p[i] == 0x7f) {
      rb_raise(eResponseError, "response header %+"PRIsVALUE" has a control character in its value", name);
    }
  }
}

static long parse_length(VALUE name, VALUE value)
{
  long i, n, x = 0;
  const char *p;
  if (RB_TYPE_P(value, T_ARRAY) && RARRAY_LEN(value) == 1) value = RARRAY_AREF(value, 0);
  if (!RB_TYPE_P(value, T_STRING) || RSTRING_LEN(value) == 0)
    rb_raise(eResponseError, "invalid content-length response header");
  p = RSTRING_PTR(value);
  n = RSTRING_LEN(value);
  for (i = 0; i < n; i++) {
    if (p[i] < '0' || p[i] > '9' || x > (LONG_MAX - 9) / 10)
      rb_raise(eResponseError, "invalid content-length response header %+"PRIsVALUE, value);
    x = x * 10 + (p[i] - '0');
  }
  return x;
}

static int each_header(VALUE name, VALUE value, VALUE arg)
{
  struct head_ctx *c = (struct head_ctx *)arg;

  if (!RB_TYPE_P(name, T_STRING))
    rb_raise(eResponseError, "response header name %+"PRIsVALUE" is not a String", name);
  if (RSTRING_LEN(name) > 5 && strncmp(RSTRING_PTR(name), "rack.", 5) == 0) {
    if (name_is(name, "rack.hijack", 11)) c->h->hijack = value;
    return ST_CONTINUE;
  }
  check_name(name);

  switch (RSTRING_LEN(name)) {
  case 4:
    if (name_is(name, "date", 4)) c->has_date = 1;
    break;
  case 10:
    /* the server's own, about the connection it keeps (head_write) */
    if (name_is(name, "keep-alive", 10) && !c->pass_connection) return ST_CONTINUE;
    if (name_is(name, "connection", 10)) {
      VALUE s = RB_TYPE_P(value, T_ARRAY) ? rb_ary_join(value, rb_str_new(",", 1)) : value;
      if (RB_TYPE_P(s, T_STRING) && rb_funcall(rb_funcall(s, rb_intern("downcase"), 0),
                                               rb_intern("include?"), 1,
                                               rb_str_new_cstr("close")) == Qtrue)
        c->conn_close = 1;
      /* only a protocol switch keeps the app's own Connection field */
      if (!c->pass_connection) return ST_CONTINUE;
    }
    break;
  case 21:
  case 25:
    /* looked at only when the server reports load itself: the app's own wins */
    if (!NIL_P(c->h->load_report) &&
        (name_is(name, "endpoint-load-metrics", 21) || name_is(name, "endpoint-load-metrics-bin", 25)))
      c->app_report = 1;
    break;
  case 14:
    if (name_is(name, "content-length", 14)) {
      /* 1xx and 204 have no body and must not announce one (RFC 9110 8.6) */
      if (c->code < 200 || c->code == 204) return ST_CONTINUE;
      /* a second one (a Rack 2 Hash may spell the name twice): the first
       * frames the body, and a sender sends one (RFC 9110 8.6) */
      if (c->cl_end > c->cl_start) return ST_CONTINUE;
      c->app_length = parse_length(name, value);
      c->cl_start = RSTRING_LEN(c->buf);
      write_value(c, name, RB_TYPE_P(value, T_ARRAY) ? RARRAY_AREF(value, 0) : value, 0);
      c->cl_end = RSTRING_LEN(c->buf);
      return ST_CONTINUE;
    }
    break;
  case 17:
    if (name_is(name, "transfer-encoding", 17)) {
      if (c->code < 200 || c->code == 204) return ST_CONTINUE;
      c->has_te = 1;
      c->te_chunked = ends_in_chunked(value);
    }
    break;
  }

  if (RB_TYPE_P(value, T_ARRAY)) {
    long i;
    for (i = 0; i < RARRAY_LEN(value); i++) write_value(c, name, RARRAY_AREF(value, i), 0);
  } else {
    write_value(c, name, value, 1);
  }
  return ST_CONTINUE;
}

/*
 * Removes buf[from, to): the app's content-length line when it also sent
 * transfer-encoding, which frames the body (RFC 9112 6.2, 6.3).
 */
static void drop_bytes(VALUE buf, long from, long to)
{
  char *p = RSTRING_PTR(buf);
  long len = RSTRING_LEN(buf);
  memmove(p + from, p + to, (size_t)(len - to));
  rb_str_set_len(buf, len - (to - from));
}

static void cat_long(VALUE buf, long n)
{
  char tmp[24];
  int len = snprintf(tmp, sizeof(tmp), "%ld", n);
  rb_str_buf_cat(buf, tmp, len);
}

/* Sum of byte sizes when every element is a String; -1 otherwise. */
static long parts_length(VALUE parts)
{
  long i, total = 0;
  for (i = 0; i < RARRAY_LEN(parts); i++) {
    VALUE s = RARRAY_AREF(parts, i);
    if (!RB_TYPE_P(s, T_STRING)) rb_raise(eResponseError, "response body yielded a %"PRIsVALUE", not a String", rb_obj_class(s));
    total += RSTRING_LEN(s);
  }
  return total;
}

static VALUE head_alloc(VALUE klass)
{
  head_t *h;
  VALUE obj = TypedData_Make_Struct(klass, head_t, &head_type, h);
  h->content_length = -1;
  h->hijack = Qnil;
  h->keep_alive_line = Qnil;
  h->load_report = Qnil;
  return obj;
}

/*
 * new(keep_alive_line = nil, load_report = nil): the line, a whole "name:
 * value\r\n", goes into every response that keeps its connection open
 * (the idle timeout clients are told). Frozen: it is copied into each head
 * as it is. load_report: a LoadReport (orca_load_report), whose
 * endpoint-load-metrics line goes into every final response unless the
 * app sent a load report itself.
 */
static VALUE head_initialize(int argc, VALUE *argv, VALUE self)
{
  head_t *h = rb_check_typeddata(self, &head_type);
  VALUE line = argc > 0 ? argv[0] : Qnil, report = argc > 1 ? argv[1] : Qnil;
  rb_check_arity(argc, 0, 2);
  if (!NIL_P(line)) {
    StringValue(line);
    line = rb_str_new_frozen(line);
  }
  if (!NIL_P(report) && !nw_load_report_p(report))
    rb_raise(rb_eTypeError, "not a Narwhal::LoadReport: %"PRIsVALUE, rb_obj_class(report));
  h->keep_alive_line = line;
  h->load_report = report;
  return self;
}

static int status_code(VALUE status)
{
  int code;
  if (RB_TYPE_P(status, T_STRING)) status = rb_str_to_inum(status, 10, 1);
  if (!RB_INTEGER_TYPE_P(status)) rb_raise(eResponseError, "response status is not an Integer");
  code = NUM2INT(status);
  if (code < MIN_STATUS || code > MAX_STATUS) rb_raise(eResponseError, "invalid response status %d", code);
  return code;
}

/* "HTTP/1.1 200 OK\r\n" */
static void write_status_line(VALUE buf, int code)
{
  const char *reason = reason_phrase(code);
  char line[16];
  snprintf(line, sizeof(line), "HTTP/1.1 %03d ", code);
  rb_str_buf_cat(buf, line, 13);
  rb_str_buf_cat(buf, reason, (long)strlen(reason));
  rb_str_buf_cat(buf, "\r\n", 2);
}

/* The app's fields, checked; its content-length goes if it also framed the
 * body with transfer-encoding, which wins (RFC 9112 6.2, 6.3). */
static void write_app_fields(struct head_ctx *c, VALUE headers)
{
  rb_hash_foreach(headers, each_header, (VALUE)c);
  if (!NIL_P(c->h->hijack)) c->pass_connection = 1;
  if (c->has_te && c->cl_end > c->cl_start) drop_bytes(c->buf, c->cl_start, c->cl_end);
}

/* Date, unless the app gave one (RFC 9110 6.6.1: an origin server sends it). */
static void write_date(struct head_ctx *c)
{
  if (c->has_date) return;
  rb_str_buf_cat(c->buf, "date: ", 6);
  rb_str_buf_cat(c->buf, http_date(), DATE_LEN);
  rb_str_buf_cat(c->buf, "\r\n", 2);
}

/* The server's load report (orca_load_report), in final responses only and
 * not beside the app's own. */
static void write_load_report(struct head_ctx *c)
{
  const char *line;
  long len;
  if (c->code < 200 || c->app_report) return;
  line = nw_load_report_line(c->h->load_report, &len);
  rb_str_buf_cat(c->buf, line, len);
}

/*
 * How a body the app did not frame itself goes: with its length (the
 * app's content-length, or the sum of an Array body's parts: small ones
 * then follow the head in buf, *hint kept), chunked to an HTTP/1.1
 * client, else until the connection closes. *hint is set to nil when the
 * body does not go into buf.
 */
static int length_mode(struct head_ctx *c, int flags, VALUE *hint)
{
  head_t *h = c->h;
  long length = -1;
  int mode;

  if (RB_TYPE_P(*hint, T_ARRAY)) length = parts_length(*hint);
  else if (RB_INTEGER_TYPE_P(*hint)) length = NUM2LONG(*hint);

  if (c->app_length >= 0) {
    mode = (flags & REQ_HEAD) ? MODE_DONE : MODE_LENGTH;
    if (mode == MODE_LENGTH && RB_TYPE_P(*hint, T_ARRAY) && length == c->app_length && length <= INLINE_BODY_MAX)
      mode = MODE_DONE;
    else
      *hint = Qnil;
    length = c->app_length;
  } else if (length > 0 || (length == 0 && !(flags & REQ_HEAD))) {
    /*
     * For HEAD an empty body tells nothing of GET's length (Rack::Head
     * empties every body): announcing 0 could be false, which RFC 9110
     * 8.6 forbids. A non-empty body is the app's GET body.
     */
    rb_str_buf_cat(c->buf, "content-length: ", 16);
    cat_long(c->buf, length);
    rb_str_buf_cat(c->buf, "\r\n", 2);
    if (flags & REQ_HEAD) mode = MODE_DONE;
    else if (RB_TYPE_P(*hint, T_ARRAY) && length <= INLINE_BODY_MAX) mode = MODE_DONE;
    else { mode = MODE_LENGTH; *hint = Qnil; }
  } else if (flags & REQ_HEAD) {
    mode = MODE_DONE;
  } else if (flags & REQ_HTTP11) {
    rb_str_buf_cat(c->buf, "transfer-encoding: chunked\r\n", 28);
    mode = MODE_CHUNKED;
  } else {
    mode = MODE_CLOSE;
    h->keepalive = 0;
  }
  h->content_length = length;
  return mode;
}

/* What the caller does with the body after buf is sent (MODE_*). */
static int body_mode(struct head_ctx *c, int flags, int no_body, VALUE *hint)
{
  int mode;
  if (!NIL_P(c->h->hijack)) {
    c->h->keepalive = 0;
    return MODE_HIJACK;
  }
  if (no_body) return MODE_DONE;
  if (!c->has_te) return length_mode(c, flags, hint);
  mode = (flags & REQ_HEAD) ? MODE_DONE : MODE_RAW;
  /* no chunked last: the body has no end but the connection's */
  if (mode == MODE_RAW && !c->te_chunked) c->h->keepalive = 0;
  return mode;
}

/* The server's own Connection and Keep-Alive fields (a protocol switch and
 * a hijack keep the app's, and never keep the connection). */
static void write_connection(struct head_ctx *c, int mode, int flags)
{
  head_t *h = c->h;
  if (mode != MODE_HIJACK && !c->pass_connection) {
    if (!h->keepalive) {
      rb_str_buf_cat(c->buf, "connection: close\r\n", 19);
    } else {
      if (!(flags & REQ_HTTP11)) rb_str_buf_cat(c->buf, "connection: keep-alive\r\n", 24);
      if (!NIL_P(h->keep_alive_line))
        rb_str_buf_cat(c->buf, RSTRING_PTR(h->keep_alive_line), RSTRING_LEN(h->keep_alive_line));
    }
  } else if (c->code == 101 || mode == MODE_HIJACK) {
    h->keepalive = 0;
  }
}

/* A small Array body goes after the head: one write for both. */
static void append_body(VALUE buf, VALUE parts)
{
  long i;
  for (i = 0; i < RARRAY_LEN(parts); i++) {
    VALUE part = RARRAY_AREF(parts, i);
    /* cat, not append: appending would negotiate (and fail on) encodings */
    rb_str_buf_cat(buf, RSTRING_PTR(part), RSTRING_LEN(part));
  }
}

/*
 * write(buf, status, headers, body_hint, request_flags) -> mode
 *
 * body_hint: an Array of Strings (the whole body), an Integer (its length,
 * for file bodies) or nil (unknown, streamed).
 */
static VALUE head_write(VALUE self, VALUE buf, VALUE status, VALUE headers, VALUE hint, VALUE vflags)
{
  head_t *h = rb_check_typeddata(self, &head_type);
  int flags = NUM2INT(vflags), mode, no_body;
  struct head_ctx c;

  StringValue(buf);
  rb_str_modify(buf);
  rb_str_set_len(buf, 0);
  /* bytes only: header values and body parts may be in any encoding */
  rb_enc_associate_index(buf, rb_ascii8bit_encindex());
  Check_Type(headers, T_HASH);

  memset(&c, 0, sizeof(c));
  c.buf = buf;
  c.h = h;
  c.code = status_code(status);
  c.app_length = -1;
  c.pass_connection = c.code == 101;
  h->hijack = Qnil;
  h->content_length = -1;
  h->keepalive = (flags & REQ_KEEPALIVE) != 0;

  write_status_line(buf, c.code);
  write_app_fields(&c, headers);
  write_date(&c);
  if (!NIL_P(h->load_report)) write_load_report(&c);
  if (c.conn_close) h->keepalive = 0;
  no_body = c.code < 200 || c.code == 204 || c.code == 304;
  mode = body_mode(&c, flags, no_body, &hint);
  write_connection(&c, mode, flags);
  rb_str_buf_cat(buf, "\r\n", 2);
  if (mode == MODE_DONE && !no_body && !(flags & REQ_HEAD) && RB_TYPE_P(hint, T_ARRAY)) append_body(buf, hint);
  return INT2FIX(mode);
}

/* For the request loop (request_loop.c): #write and #keepalive? */
VALUE nw_response_head_write(VALUE head, VALUE buf, VALUE status, VALUE headers, VALUE hint, int flags)
{
  return head_write(head, buf, status, headers, hint, INT2FIX(flags));
}

int nw_response_head_keepalive(VALUE head)
{
  return ((head_t *)rb_check_typeddata(head, &head_type))->keepalive;
}

static VALUE head_content_length(VALUE self)
{
  head_t *h = rb_check_typeddata(self, &head_type);
  return h->content_length < 0 ? Qnil : LONG2NUM(h->content_length);
}

static VALUE head_keepalive_p(VALUE self)
{
  return ((head_t *)rb_check_typeddata(self, &head_type))->keepalive ? Qtrue : Qfalse;
}

static VALUE head_hijack(VALUE self)
{
  return ((head_t *)rb_check_typeddata(self, &head_type))->hijack;
}

/* The current IMF-fixdate, for responses built outside #write. */
static VALUE head_s_date(VALUE klass)
{
  return rb_str_new(http_date(), DATE_LEN);
}

void nw_init_response(void)
{
  eResponseError = rb_define_class_under(nw_mNarwhal, "ResponseError", rb_eStandardError);
  cResponseHead = rb_define_class_under(nw_mNarwhal, "ResponseHead", rb_cObject);
  rb_define_alloc_func(cResponseHead, head_alloc);
  rb_define_method(cResponseHead, "initialize", head_initialize, -1);
  rb_define_method(cResponseHead, "write", head_write, 5);
  rb_define_method(cResponseHead, "content_length", head_content_length, 0);
  rb_define_method(cResponseHead, "keepalive?", head_keepalive_p, 0);
  rb_define_method(cResponseHead, "hijack", head_hijack, 0);
  rb_define_singleton_method(cResponseHead, "http_date", head_s_date, 0);
  rb_define_const(cResponseHead, "REQ_HTTP11", INT2FIX(REQ_HTTP11));
  rb_define_const(cResponseHead, "REQ_KEEPALIVE", INT2FIX(REQ_KEEPALIVE));
  rb_define_const(cResponseHead, "REQ_HEAD", INT2FIX(REQ_HEAD));
  rb_define_const(cResponseHead, "DONE", INT2FIX(MODE_DONE));
  rb_define_const(cResponseHead, "LENGTH", INT2FIX(MODE_LENGTH));
  rb_define_const(cResponseHead, "CHUNKED", INT2FIX(MODE_CHUNKED));
  rb_define_const(cResponseHead, "RAW", INT2FIX(MODE_RAW));
  rb_define_const(cResponseHead, "CLOSE", INT2FIX(MODE_CLOSE));
  rb_define_const(cResponseHead, "HIJACK", INT2FIX(MODE_HIJACK));
}
