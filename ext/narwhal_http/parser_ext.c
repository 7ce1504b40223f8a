/*
 * Narwhal::HttpParser: the Ruby face of parser.c. It writes what the parser
 * finds straight into a Rack env Hash.
 */
#include "narwhal_http.h"
#include "parser.h"

/* Longest field name we turn into an env key (431 beyond). */
#define MAX_FIELD_NAME 256
#define HTTP_PREFIX "HTTP_"
#define HTTP_PREFIX_LEN 5
#define HTTP_FIELDS_TOO_LARGE 431
/* Env keys a request's fields set that are remembered: a key set once
 * more (a repeated field, joined) is looked up, a new one just set. */
#define SET_KEYS_MAX 16

static VALUE cHttpParser, eHttpParserError;

typedef struct {
  nw_parser p;
  VALUE env;      /* env being filled by execute */
  VALUE out;      /* String receiving chunked body data */
  VALUE deferred; /* fields whose names hold '_' (see on_headers_complete) */
  int queue_stamp; /* the head has X-Request-Start or X-Queue-Start */
  VALUE method;   /* the request's REQUEST_METHOD and PATH_INFO, as set */
  VALUE path;
  int nset;       /* keys in set_keys */
  VALUE set_keys[SET_KEYS_MAX]; /* compared, never used: not marked */
} parser_wrap;

static void wrap_mark(void *ptr)
{
  parser_wrap *w = ptr;
  rb_gc_mark(w->env);
  rb_gc_mark(w->out);
  rb_gc_mark(w->deferred);
  rb_gc_mark(w->method);
  rb_gc_mark(w->path);
}

static size_t wrap_size(const void *ptr) { return sizeof(parser_wrap); }

static const rb_data_type_t parser_type = {
  "Narwhal::HttpParser",
  { wrap_mark, RUBY_TYPED_DEFAULT_FREE, wrap_size, NULL, {0} },
  0, 0, RUBY_TYPED_FREE_IMMEDIATELY
};

static parser_wrap *get_wrap(VALUE self)
{
  return rb_check_typeddata(self, &parser_type);
}

/* Between requests: nothing of the last one is kept. */
static void forget_request(parser_wrap *w)
{
  w->env = Qnil;
  w->out = Qnil;
  w->deferred = Qnil;
  w->method = Qnil;
  w->path = Qnil;
  w->queue_stamp = 0;
  w->nset = 0;
}

/* 1 when this request's fields set key before (or too many keys were set
 * to tell): its value is joined to what is there. */
static int set_before(parser_wrap *w, VALUE key)
{
  int i;
  for (i = 0; i < w->nset; i++)
    if (w->set_keys[i] == key) return 1;
  if (w->nset == SET_KEYS_MAX) return 1;
  w->set_keys[w->nset++] = key;
  return 0;
}

static VALUE str_span(nw_span s) { return rb_str_new(s.ptr, (long)s.len); }

static VALUE port_value(nw_span port, int https)
{
  if (port.len) return nw_fstring(port.ptr, (long)port.len);
  return https ? nw_val_port_443 : nw_val_port_80;
}

static int env_is_https(VALUE env)
{
  VALUE scheme = rb_hash_lookup2(env, nw_key_URL_SCHEME, Qnil);
  return RB_TYPE_P(scheme, T_STRING) && rb_str_equal(scheme, nw_val_https) == Qtrue;
}

static int on_request_line(void *data, const nw_request_line *rl)
{
  parser_wrap *w = data;
  VALUE env = w->env, path;

  w->method = nw_fstring(rl->method.ptr, (long)rl->method.len);
  rb_hash_aset(env, nw_key_REQUEST_METHOD, w->method);
  rb_hash_aset(env, nw_key_REQUEST_URI, str_span(rl->target));
  if (rl->form == NW_FORM_ABSOLUTE && rl->path.len == 0)
    path = rb_str_new("/", 1);
  else if (rl->form == NW_FORM_AUTHORITY)
    path = str_span(rl->target); /* Rack: PATH_INFO is the authority */
  else
    path = str_span(rl->path);
  rb_hash_aset(env, nw_key_REQUEST_PATH, path);
  w->path = rb_str_dup(path);
  rb_hash_aset(env, nw_key_PATH_INFO, w->path);
  rb_hash_aset(env, nw_key_QUERY_STRING, str_span(rl->query));
  rb_hash_aset(env, nw_key_SERVER_PROTOCOL, rl->http_minor ? nw_val_HTTP_1_1 : nw_val_HTTP_1_0);
  rb_hash_aset(env, nw_key_HTTP_VERSION, rl->http_minor ? nw_val_HTTP_1_1 : nw_val_HTTP_1_0);

  if (rl->form == NW_FORM_ABSOLUTE || rl->form == NW_FORM_AUTHORITY) {
    int https = 0;
    const char *end = rl->port.len ? rl->port.ptr + rl->port.len : rl->host.ptr + rl->host.len;
    if (rl->form == NW_FORM_ABSOLUTE) {
      https = rl->scheme.len == 5;
      rb_hash_aset(env, nw_key_URL_SCHEME, https ? nw_val_https : nw_val_http);
    }
    set_before(w, nw_key_HTTP_HOST); /* a Host field is joined to it */
    rb_hash_aset(env, nw_key_HTTP_HOST, rb_str_new(rl->host.ptr, end - rl->host.ptr));
    rb_hash_aset(env, nw_key_SERVER_NAME, str_span(rl->host));
    rb_hash_aset(env, nw_key_SERVER_PORT, port_value(rl->port, https));
  }
  return 0;
}

static int on_host(void *data, nw_span host, nw_span port)
{
  parser_wrap *w = data;
  if (host.len == 0) return 0; /* empty Host: keep the listener's name */
  /* interned, as the port: a connection's requests all name the same host,
   * and an object less per request (a name no longer used is collected) */
  rb_hash_aset(w->env, nw_key_SERVER_NAME, nw_fstring(host.ptr, (long)host.len));
  rb_hash_aset(w->env, nw_key_SERVER_PORT, port_value(port, env_is_https(w->env)));
  return 0;
}

/* Adds value under key, joining a repeated field as RFC 9110 5.3 allows. */
static void add_value(VALUE hash, VALUE key, nw_span value, int cookie)
{
  VALUE cur = rb_hash_lookup2(hash, key, Qundef);
  if (cur == Qundef || !RB_TYPE_P(cur, T_STRING)) {
    rb_hash_aset(hash, key, str_span(value));
    return;
  }
  if (OBJ_FROZEN(cur)) {
    cur = rb_str_dup(cur);
    rb_hash_aset(hash, key, cur);
  }
  rb_str_cat(cur, cookie ? "; " : ", ", 2);
  rb_str_cat(cur, value.ptr, (long)value.len);
}

static int on_field(void *data, int id, nw_span name, nw_span value, int trailer)
{
  parser_wrap *w = data;
  char kbuf[HTTP_PREFIX_LEN + MAX_FIELD_NAME];
  VALUE key;
  size_t i;
  int underscore = 0;

  if (id == NW_FIELD_CONTENT_LENGTH) {
    key = nw_key_CONTENT_LENGTH;
  } else if (id == NW_FIELD_CONTENT_TYPE) {
    key = nw_key_CONTENT_TYPE;
  } else {
    if (name.len > MAX_FIELD_NAME) return HTTP_FIELDS_TOO_LARGE;
    memcpy(kbuf, HTTP_PREFIX, HTTP_PREFIX_LEN);
    for (i = 0; i < name.len; i++) {
      unsigned char c = (unsigned char)name.ptr[i];
      if (c == '_') underscore = 1;
      if (c == '-') c = '_';
      else if (c >= 'a' && c <= 'z') c = (unsigned char)(c - ('a' - 'A'));
      kbuf[HTTP_PREFIX_LEN + i] = (char)c;
    }
    key = nw_fstring(kbuf, (long)(HTTP_PREFIX_LEN + name.len));
    /* the request line's version wins over a "Version:" field */
    if (key == nw_key_HTTP_VERSION) return 0;
  }

  if (!trailer && (key == nw_key_HTTP_X_REQUEST_START || key == nw_key_HTTP_X_QUEUE_START)) w->queue_stamp = 1;
  if (trailer) {
    /* trailers never replace what the header section said */
    if (!underscore && rb_hash_lookup2(w->env, key, Qundef) == Qundef)
      rb_hash_aset(w->env, key, str_span(value));
    return 0;
  }
  if (underscore) {
    /*
     * "X_Forwarded_For" and "X-Forwarded-For" map to the same key; a proxy
     * sets the dashed one, so the underscored one may only fill a gap.
     */
    if (NIL_P(w->deferred)) w->deferred = rb_hash_new();
    add_value(w->deferred, key, value, 0);
    return 0;
  }
  if (set_before(w, key))
    add_value(w->env, key, value, id == NW_FIELD_COOKIE);
  else
    rb_hash_aset(w->env, key, str_span(value));
  return 0;
}

static int merge_deferred(VALUE key, VALUE val, VALUE env)
{
  if (rb_hash_lookup2(env, key, Qundef) == Qundef) rb_hash_aset(env, key, val);
  return ST_CONTINUE;
}

static int on_headers_complete(void *data)
{
  parser_wrap *w = data;
  if (!NIL_P(w->deferred)) {
    rb_hash_foreach(w->deferred, merge_deferred, w->env);
    w->deferred = Qnil;
  }
  return 0;
}

static int on_body(void *data, const char *ptr, size_t len)
{
  parser_wrap *w = data;
  rb_str_cat(w->out, ptr, (long)len);
  return 0;
}

static const nw_callbacks callbacks = {
  on_request_line, on_host, on_field, on_headers_complete, on_body
};

static VALUE parser_alloc(VALUE klass)
{
  parser_wrap *w;
  VALUE obj = TypedData_Make_Struct(klass, parser_wrap, &parser_type, w);
  nw_parser_init(&w->p, &callbacks, w);
  forget_request(w);
  return obj;
}

/* configure(max_request_line, max_header_size, max_header_fields, max_body_size) */
static VALUE parser_configure(VALUE self, VALUE line, VALUE head, VALUE fields, VALUE body)
{
  parser_wrap *w = get_wrap(self);
  w->p.max_request_line = NUM2SIZET(line);
  w->p.max_header_size = NUM2SIZET(head);
  w->p.max_header_fields = NUM2UINT(fields);
  w->p.max_body_size = NIL_P(body) ? 0 : NUM2ULL(body);
  return self;
}

static VALUE parser_reset(VALUE self)
{
  parser_wrap *w = get_wrap(self);
  nw_parser_reset(&w->p);
  forget_request(w);
  return self;
}

static void raise_parse_error(parser_wrap *w)
{
  VALUE exc = rb_exc_new_cstr(eHttpParserError, "malformed or oversized request");
  forget_request(w);
  rb_ivar_set(exc, rb_intern("@status"), INT2FIX(w->p.error));
  rb_exc_raise(exc);
}

static size_t check_offset(VALUE buf, VALUE off)
{
  size_t o = NUM2SIZET(off);
  if (o > (size_t)RSTRING_LEN(buf)) rb_raise(rb_eArgError, "offset past end of buffer");
  return o;
}

/* execute(env, buf, offset) -> offset after the bytes consumed */
static VALUE parser_execute(VALUE self, VALUE env, VALUE buf, VALUE off)
{
  parser_wrap *w = get_wrap(self);
  size_t o, r;

  Check_Type(env, T_HASH);
  StringValue(buf);
  o = check_offset(buf, off);
  w->env = env;
  r = nw_parse_head(&w->p, RSTRING_PTR(buf), (size_t)RSTRING_LEN(buf), o);
  RB_GC_GUARD(buf);
  if (r == NW_PARSE_ERROR) raise_parse_error(w);
  return SIZET2NUM(r);
}

/*
 * For the request loop (request_loop.c): what #execute does, from off,
 * without raising: the offset after the bytes consumed, or -1 when they
 * are malformed or too large (the loop leaves such a request to Ruby,
 * whose #execute raises for it).
 */
long nw_http_parser_head(VALUE parser, VALUE env, VALUE buf, long off)
{
  parser_wrap *w = get_wrap(parser);
  size_t r;

  w->env = env;
  r = nw_parse_head(&w->p, RSTRING_PTR(buf), (size_t)RSTRING_LEN(buf), (size_t)off);
  RB_GC_GUARD(buf);
  if (r == NW_PARSE_ERROR) {
    forget_request(w);
    return -1;
  }
  return (long)r;
}

/* The head parsed is a whole request the loop serves itself: complete,
 * no body, no 100-continue, no proxy queue stamp (Responder::QueueTime is Ruby's). */
int nw_http_parser_plain(VALUE parser)
{
  parser_wrap *w = get_wrap(parser);
  int s = w->p.state;
  if (s < NW_S_HEAD_DONE || s == NW_S_ERROR || w->queue_stamp) return 0;
  if (w->p.flags & (NW_F_CHUNKED | NW_F_EXPECT_CONTINUE)) return 0;
  return !(w->p.flags & NW_F_CONTENT_LENGTH) || w->p.content_length == 0;
}

int nw_http_parser_keepalive(VALUE parser) { return nw_keep_alive(&get_wrap(parser)->p); }

int nw_http_parser_http11(VALUE parser) { return get_wrap(parser)->p.http_minor >= 1; }

/* A parser configured by limits (a Server::Limits), for the request loop. */
VALUE nw_http_parser_for(VALUE limits)
{
  VALUE parser = rb_class_new_instance(0, NULL, cHttpParser);
  parser_configure(parser, rb_struct_getmember(limits, rb_intern("max_request_line")),
                   rb_struct_getmember(limits, rb_intern("max_header_size")),
                   rb_struct_getmember(limits, rb_intern("max_header_fields")),
                   rb_struct_getmember(limits, rb_intern("max_body_size")));
  return parser;
}

/* The REQUEST_METHOD and PATH_INFO the head set (nil before its request
 * line), without looking them up in the env. */
VALUE nw_http_parser_method(VALUE parser) { return get_wrap(parser)->method; }

VALUE nw_http_parser_path(VALUE parser) { return get_wrap(parser)->path; }

void nw_http_parser_reset(VALUE parser) { parser_reset(parser); }

/* decode_chunked(env, buf, offset, out) -> offset after the bytes consumed */
static VALUE parser_decode_chunked(VALUE self, VALUE env, VALUE buf, VALUE off, VALUE out)
{
  parser_wrap *w = get_wrap(self);
  size_t o, r;

  Check_Type(env, T_HASH);
  StringValue(buf);
  StringValue(out);
  rb_str_modify(out);
  o = check_offset(buf, off);
  w->env = env;
  w->out = out;
  r = nw_parse_chunked(&w->p, RSTRING_PTR(buf), (size_t)RSTRING_LEN(buf), o);
  RB_GC_GUARD(buf);
  w->out = Qnil;
  if (r == NW_PARSE_ERROR) raise_parse_error(w);
  return SIZET2NUM(r);
}

static VALUE parser_head_done_p(VALUE self)
{
  int s = get_wrap(self)->p.state;
  return (s >= NW_S_HEAD_DONE && s != NW_S_ERROR) ? Qtrue : Qfalse;
}

static VALUE parser_body_done_p(VALUE self)
{
  return get_wrap(self)->p.state == NW_S_BODY_DONE ? Qtrue : Qfalse;
}

/* queue_stamp? -> true when the head had X-Request-Start or X-Queue-Start:
 * only then is the env looked up for them (Responder::QueueTime), which costs more
 * than the rest of a request's bookkeeping. */
static VALUE parser_queue_stamp_p(VALUE self)
{
  return get_wrap(self)->queue_stamp ? Qtrue : Qfalse;
}

static VALUE parser_chunked_p(VALUE self)
{
  return (get_wrap(self)->p.flags & NW_F_CHUNKED) ? Qtrue : Qfalse;
}

static VALUE parser_keepalive_p(VALUE self)
{
  return nw_keep_alive(&get_wrap(self)->p) ? Qtrue : Qfalse;
}

static VALUE parser_expect_continue_p(VALUE self)
{
  return (get_wrap(self)->p.flags & NW_F_EXPECT_CONTINUE) ? Qtrue : Qfalse;
}

static VALUE parser_http11_p(VALUE self)
{
  return get_wrap(self)->p.http_minor >= 1 ? Qtrue : Qfalse;
}

/* Content-Length of the request, or nil when it has none. */
static VALUE parser_content_length(VALUE self)
{
  parser_wrap *w = get_wrap(self);
  if (!(w->p.flags & NW_F_CONTENT_LENGTH)) return Qnil;
  return ULL2NUM(w->p.content_length);
}

void nw_init_parser(void)
{
  eHttpParserError = rb_define_class_under(nw_mNarwhal, "HttpParserError", rb_eStandardError);
  rb_define_attr(eHttpParserError, "status", 1, 0);

  cHttpParser = rb_define_class_under(nw_mNarwhal, "HttpParser", rb_cObject);
  rb_define_alloc_func(cHttpParser, parser_alloc);
  rb_define_method(cHttpParser, "configure", parser_configure, 4);
  rb_define_method(cHttpParser, "reset", parser_reset, 0);
  rb_define_method(cHttpParser, "execute", parser_execute, 3);
  rb_define_method(cHttpParser, "decode_chunked", parser_decode_chunked, 4);
  rb_define_method(cHttpParser, "head_done?", parser_head_done_p, 0);
  rb_define_method(cHttpParser, "body_done?", parser_body_done_p, 0);
  rb_define_method(cHttpParser, "chunked?", parser_chunked_p, 0);
  rb_define_method(cHttpParser, "queue_stamp?", parser_queue_stamp_p, 0);
  rb_define_method(cHttpParser, "keepalive?", parser_keepalive_p, 0);
  rb_define_method(cHttpParser, "expect_continue?", parser_expect_continue_p, 0);
  rb_define_method(cHttpParser, "http11?", parser_http11_p, 0);
  rb_define_method(cHttpParser, "content_length", parser_content_length, 0);
  rb_define_const(cHttpParser, "MAX_CHUNK_LINE", INT2FIX(NW_MAX_CHUNK_LINE));
}
