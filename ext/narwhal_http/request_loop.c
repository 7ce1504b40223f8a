/*
 * Narwhal::RequestLoop: the requests of one connection read, parsed, run
 * and answered in C while they are the common kind, so that between two
 * requests on a kept-alive connection no Ruby runs but the app (and the
 * Request's bookkeeping: #start, #complete, #flags, #finish).
 *
 * What is not common goes back to Ruby at a clean boundary:
 * - before the app: a head that is incomplete, malformed, or asks for a
 *   body, 100-continue or queue time (a proxy's X-Request-Start). Its bytes
 *   stay in the buffer, unparsed, for Connection#process.
 * - after the app: anything but an Integer status, a Hash of headers and
 *   a plain Array body that fits in the buffer with its head; a hijack;
 *   response callbacks; early hints still spooled; an app that raised.
 *   The Responder finishes the response (#respond_returned) as if it had
 *   called the app itself.
 * - a response the socket does not take whole: the Responder sends the
 *   rest (#send_rest), spooled or waited for like any write.
 *
 * One per thread that serves (its Responder's): it holds that thread's
 * read and response buffers. A connection's own buffer gets only the bytes
 * the loop leaves to Ruby, so that a connection between requests (or
 * closed after its first) has none: no READ_SIZE of memory per idle
 * connection, and none allocated and freed per new one.
 */
#include "narwhal_http.h" /* first: ruby.h sets _GNU_SOURCE (accept4) */
#include "scoreboard.h"
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

/* Bytes asked of the socket per read (Connection::READ_SIZE is this). */
#define READ_SIZE (16 * 1024)
/* The buffer the response head (and a small body) is built in. */
#define OUT_CAPACITY 4096

typedef struct {
  VALUE app;       /* the Rack app */
  VALUE responder; /* the Responder: what the loop leaves to Ruby */
  VALUE slot;      /* the thread's Scoreboard::ThreadSlot */
  VALUE head;      /* a ResponseHead */
  VALUE parser;    /* an HttpParser, made by the first #serve */
  VALUE in;        /* the read buffer */
  VALUE out;       /* the response buffer */
  long requests;   /* requests the connection has had */
  double arrived;  /* when the bytes of the last read arrived (Arrival); 0.0: unknown */
  double queue_deadline; /* seconds a request may wait before it is shed; 0: no limit */
} request_loop;

static ID id_limits, id_call, id_start, id_complete, id_flags, id_finish, id_out, id_pending_p,
    id_respond_returned, id_send_rest, id_request_started, id_request_finished, id_iv_hijacked, id_iv_io,
    id_attach, id_remote_addr_set, id_queue_time, id_queue_deadline, id_shed;
/* Narwhal::Next's KEEP and CLOSE: what the loop answers for what it served */
static VALUE sym_keep, sym_close;
static VALUE key_response_finished, key_after_reply, key_early_hints, key_queue_time;

static void loop_mark(void *ptr)
{
  request_loop *l = ptr;
  rb_gc_mark(l->app);
  rb_gc_mark(l->responder);
  rb_gc_mark(l->slot);
  rb_gc_mark(l->head);
  rb_gc_mark(l->parser);
  rb_gc_mark(l->in);
  rb_gc_mark(l->out);
}

static size_t loop_size(const void *ptr) { return sizeof(request_loop); }

static const rb_data_type_t loop_type = {
  "Narwhal::RequestLoop",
  { loop_mark, RUBY_TYPED_DEFAULT_FREE, loop_size, NULL, {0} },
  0, 0, RUBY_TYPED_FREE_IMMEDIATELY
};

static request_loop *get_loop(VALUE self) { return rb_check_typeddata(self, &loop_type); }

static VALUE loop_alloc(VALUE klass)
{
  request_loop *l;
  VALUE obj = TypedData_Make_Struct(klass, request_loop, &loop_type, l);
  l->app = l->responder = l->slot = l->head = l->parser = l->in = l->out = Qnil;
  return obj;
}

/* new(app, responder, slot, head): head is the ResponseHead it builds
 * responses with (it says keep-alive as the Responder's writer does). */
static VALUE loop_initialize(VALUE self, VALUE app, VALUE responder, VALUE slot, VALUE head)
{
  request_loop *l = get_loop(self);
  l->app = app;
  l->responder = responder;
  l->slot = slot;
  l->head = head;
  l->in = rb_str_buf_new(READ_SIZE);
  l->out = rb_str_buf_new(OUT_CAPACITY);
  return self;
}

static VALUE loop_requests(VALUE self) { return LONG2NUM(get_loop(self)->requests); }

/* #arrived -> Float: when the bytes of its last read arrived (seconds
 * since the epoch; 0.0 when the socket keeps no stamp), for the bytes it
 * leaves to Ruby */
static VALUE loop_arrived(VALUE self) { return DBL2NUM(get_loop(self)->arrived); }

static void slot_started(request_loop *l, VALUE method, VALUE path, int fd)
{
  if (!nw_thread_slot_started(l->slot, method, path, fd))
    rb_funcall(l->slot, id_request_started, 3, method, path, INT2FIX(fd));
}

static void slot_finished(request_loop *l)
{
  if (!nw_thread_slot_finished(l->slot)) rb_funcall(l->slot, id_request_finished, 0);
}

/* Reads what the socket has into the loop's buffer (emptied first), and
 * when it arrived into l->arrived: bytes read, 0 at EOF, -1 with errno. */
static long read_into(request_loop *l, int fd)
{
  ssize_t n;
  rb_str_set_len(l->in, 0);
  rb_str_modify_expand(l->in, READ_SIZE);
  n = nw_recv_stamped(fd, RSTRING_PTR(l->in), READ_SIZE, &l->arrived);
  if (n > 0) rb_str_set_len(l->in, (long)n);
  return (long)n;
}

/* The request waited from its bytes' arrival until now, the server's
 * start on it: into env for the app, and the worker's kernel queue-time
 * histogram. Nothing when the socket keeps no stamp (a Unix socket's).
 * Returns the wait in seconds, or -1 when unknown. */
static double note_queue_time(request_loop *l, VALUE env)
{
  double waited = nw_arrival_since(l->arrived);
  VALUE seconds;
  if (waited < 0) return -1;
  seconds = DBL2NUM(waited);
  rb_hash_aset(env, key_queue_time, seconds);
  if (!nw_thread_slot_queue_time(l->slot, NW_SB_QUEUE_TIME_KERNEL, waited))
    rb_funcall(l->slot, id_queue_time, 2, seconds, INT2FIX(NW_SB_QUEUE_TIME_KERNEL));
  return waited;
}

/* The loop's copy of limits.queue_deadline (read with its parser's). */
static double queue_deadline_of(VALUE limits)
{
  VALUE deadline = rb_struct_getmember(limits, id_queue_deadline);
  return NIL_P(deadline) ? 0 : NUM2DBL(deadline);
}

struct app_call {
  VALUE app, env;
};

static VALUE call_app(VALUE arg)
{
  struct app_call *c = (struct app_call *)arg;
  return rb_funcall(c->app, id_call, 1, c->env);
}

struct head_call {
  VALUE head, out, status, headers, body;
  int flags;
};

static VALUE write_head(VALUE arg)
{
  struct head_call *c = (struct head_call *)arg;
  return nw_response_head_write(c->head, c->out, c->status, c->headers, c->body, c->flags);
}

static int empty_list(VALUE env, VALUE key)
{
  VALUE list = rb_hash_lookup(env, key);
  return RB_TYPE_P(list, T_ARRAY) && RARRAY_LEN(list) == 0;
}

/* The app's answer is one the loop sends itself (see the top). */
static int plain_response(VALUE res, VALUE env, VALUE request)
{
  VALUE body;
  if (!RB_TYPE_P(res, T_ARRAY) || RARRAY_LEN(res) != 3) return 0;
  body = RARRAY_AREF(res, 2);
  if (!FIXNUM_P(RARRAY_AREF(res, 0)) || !RB_TYPE_P(RARRAY_AREF(res, 1), T_HASH)) return 0;
  /* a plain Array: no close, no singleton methods */
  if (!RB_TYPE_P(body, T_ARRAY) || RBASIC_CLASS(body) != rb_cArray) return 0;
  if (RTEST(rb_ivar_get(request, id_iv_hijacked))) return 0;
  if (!empty_list(env, key_response_finished) || !empty_list(env, key_after_reply)) return 0;
  /* 103 Early Hints the socket did not take: the response goes after them */
  if (rb_hash_lookup2(env, key_early_hints, Qundef) != Qundef &&
      RTEST(rb_funcall(rb_funcall(request, id_out, 0), id_pending_p, 0)))
    return 0;
  return 1;
}

/* The app returned res, or raised error: the Responder does the rest. */
static VALUE respond_in_ruby(request_loop *l, VALUE request, VALUE res, VALUE error)
{
  return rb_funcall(l->responder, id_respond_returned, 3, request, res, error);
}

/*
 * Runs one request whose head was parsed (env) and sends its response.
 * Qtrue: sent, the connection stays; Qfalse: sent, it closes; else the
 * Responder's outcome for a response it finished (the loop stops).
 */
static VALUE run_request(request_loop *l, int fd, VALUE request, VALUE env, VALUE parser)
{
  struct app_call app = { l->app, env };
  struct head_call head;
  VALUE res, mode;
  long len, sent;
  int state = 0, keepalive;

  slot_started(l, nw_http_parser_method(parser), nw_http_parser_path(parser), fd);
  res = rb_protect(call_app, (VALUE)&app, &state);
  if (state) {
    VALUE error = rb_errinfo();
    if (!rb_obj_is_kind_of(error, rb_eStandardError) && !rb_obj_is_kind_of(error, rb_eScriptError)) {
      slot_finished(l); /* as Responder#respond's ensure; the rest unwinds */
      rb_jump_tag(state);
    }
    rb_set_errinfo(Qnil);
    return respond_in_ruby(l, request, Qnil, error);
  }
  if (!plain_response(res, env, request)) return respond_in_ruby(l, request, res, Qnil);

  head.head = l->head;
  head.out = l->out;
  head.status = RARRAY_AREF(res, 0);
  head.headers = RARRAY_AREF(res, 1);
  head.body = RARRAY_AREF(res, 2);
  head.flags = NUM2INT(rb_funcall(request, id_flags, 0));
  mode = rb_protect(write_head, (VALUE)&head, &state);
  if (state || mode != INT2FIX(MODE_DONE)) {
    /* invalid, or a body to stream: Ruby's writer does it (and says why) */
    if (state) rb_set_errinfo(Qnil);
    return respond_in_ruby(l, request, res, Qnil);
  }
  keepalive = nw_response_head_keepalive(l->head);
  len = RSTRING_LEN(l->out);
  nw_thread_slot_responding(l->slot); /* before its first byte (a test's slot has no such mark) */
  do {
    sent = (long)send(fd, RSTRING_PTR(l->out), (size_t)len, MSG_DONTWAIT | MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent != len) {
    /* the rest (or, after an error, all: its write fails the same way) */
    VALUE rest = rb_str_new(RSTRING_PTR(l->out) + (sent > 0 ? sent : 0), len - (sent > 0 ? sent : 0));
    return rb_funcall(l->responder, id_send_rest, 3, request, rest, keepalive ? Qtrue : Qfalse);
  }
  slot_finished(l);
  return keepalive ? Qtrue : Qfalse;
}

/* The connection's buffer (all of it consumed) gets what the loop read
 * from off and did not serve, or is emptied. */
static void leave_rest(VALUE buf, VALUE in, long off)
{
  long rest = RSTRING_LEN(in) - off;
  if (rest <= 0 && RSTRING_LEN(buf) == 0) return;
  rb_str_modify(buf); /* its own bytes, not shared with a copy */
  rb_str_set_len(buf, 0);
  if (rest > 0) rb_str_cat(buf, RSTRING_PTR(in) + off, rest);
}

/*
 * Reads from fd and serves each request it reads while they are the
 * common kind, starting from l->requests (the connection's count so far;
 * it is the new count after). *off: where the bytes of l->in that it did
 * not serve begin (l->in's length: none). The result is #serve's.
 */
static VALUE serve_fd(request_loop *l, int fd, VALUE request, VALUE context, long *off_out)
{
  VALUE parser = l->parser, result, in = l->in;
  long off = 0, len = 0, got = READ_SIZE, next;
  double waited;

  if (NIL_P(parser)) {
    VALUE limits = rb_struct_getmember(context, id_limits);
    parser = l->parser = nw_http_parser_for(limits);
    l->queue_deadline = queue_deadline_of(limits);
  }
  /* what an exception that unwound the loop (or a request the Responder
   * finished) left in it is not this connection's */
  nw_http_parser_reset(parser);
  for (;;) {
    VALUE env;

    if (off >= len) {
      /* a short read took all there was: the socket is drained (as
       * Connection#on_readable, no read that would only say so) */
      if (len > 0 && got < READ_SIZE) {
        off = len;
        result = Qtrue;
        break;
      }
      off = 0;
      got = len = read_into(l, fd);
      if (len <= 0) {
        result = (len < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) ? Qtrue : Qfalse;
        len = 0;
        break;
      }
    }

    env = rb_funcall(request, id_start, 0);
    next = nw_http_parser_head(parser, env, in, off);
    if (next < 0 || !nw_http_parser_plain(parser)) {
      nw_http_parser_reset(parser);
      rb_funcall(request, id_finish, 0);
      result = Qnil;
      break;
    }
    off = next;
    l->requests++; /* kept if the app unwinds the loop */
    waited = note_queue_time(l, env);
    /* the parser's verdict and the wait; Request decides the server's side */
    rb_funcall(request, id_complete, 7, Qnil, nw_http_parser_http11(parser) ? Qtrue : Qfalse,
               nw_http_parser_keepalive(parser) ? Qtrue : Qfalse, Qfalse, nw_http_parser_method(parser),
               LONG2FIX(l->requests), waited < 0 ? Qnil : DBL2NUM(waited));
    if (l->queue_deadline > 0 && waited > l->queue_deadline)
      result = rb_funcall(l->responder, id_shed, 2, request, DBL2NUM(waited)); /* 503, without the app */
    else
      result = run_request(l, fd, request, env, parser);
    if (result != Qtrue && result != Qfalse) break; /* the Responder's: Connection finishes it */
    rb_funcall(request, id_finish, 0);
    nw_http_parser_reset(parser);
    if (result == Qfalse) break;
  }
  /* a connection that closes keeps nothing */
  *off_out = result == Qfalse ? RSTRING_LEN(in) : off;
  return result;
}

/* The loop's own Qtrue/Qfalse in Narwhal::Next's words; nil and the
 * Responder's outcome pass as they are. */
static VALUE next_step(VALUE result)
{
  if (result == Qtrue) return sym_keep;
  if (result == Qfalse) return sym_close;
  return result;
}

/*
 * serve(fd, buf, request, context, requests) -> result
 *
 * Reads from fd (the connection's socket, nothing of it buffered in buf) and
 * serves each request it reads while they are the common kind, parsed
 * with its own parser (configured by context.limits): a connection needs
 * one of its own only for what Ruby reads. requests: how many the
 * connection had; Request#complete, given the parser's verdict and the
 * count, decides keep-alive as for a request Ruby reads. It reads into its own buffer: after it, buf holds only the bytes
 * it left (or nothing), and #requests is the new count. The result:
 * - :keep: nothing left to read or serve, the connection stays (idle);
 * - :close: it closes (the client did, or the response said so);
 * - nil: buf holds bytes the loop did not serve (Ruby parses them);
 * - a Responder outcome (:keep, :close, :release): the Responder finished
 *   the last request, which Ruby finishes (its env is still set); buf
 *   holds what came after it.
 */
static VALUE loop_serve(VALUE self, VALUE vfd, VALUE buf, VALUE request, VALUE context, VALUE vrequests)
{
  request_loop *l = get_loop(self);
  long off;
  VALUE result;

  StringValue(buf);
  l->requests = NUM2LONG(vrequests);
  result = serve_fd(l, NUM2INT(vfd), request, context, &off);
  leave_rest(buf, l->in, off);
  RB_GC_GUARD(buf);
  return next_step(result);
}

struct first_serve {
  request_loop *l;
  int fd;
  VALUE request, context, writer, addr;
  long off;
};

/* The writer gets the descriptor and the request the client's address
 * (nil: a Unix socket's, which the request has), then the loop serves. */
static VALUE serve_first(VALUE arg)
{
  struct first_serve *f = (struct first_serve *)arg;
  f->writer = rb_funcall(f->request, id_out, 0);
  rb_funcall(f->writer, id_attach, 1, INT2FIX(f->fd));
  if (!NIL_P(f->addr)) rb_funcall(f->request, id_remote_addr_set, 1, f->addr);
  return serve_fd(f->l, f->fd, f->request, f->context, &f->off);
}

/* Ruby made an IO of the socket (the Responder wrote, the app hijacked):
 * from then on the socket is that IO's to close. */
static int socket_in_ruby(VALUE writer) { return !NIL_P(rb_ivar_get(writer, id_iv_io)); }

/*
 * accept_serve(listener_fd, request, context)
 *   -> nil, false or [fd, result, rest]
 *
 * Accepts a connection from the listener and serves its first requests
 * (#serve) with request, whose SocketWriter has no socket yet: it is
 * given the descriptor (#attach) and makes a Ruby IO of it only if Ruby
 * writes to it. So a connection whose requests all go this way, and that
 * closes after them (HTTP/1.0, Connection: close), costs no Ruby object of
 * its own: it is closed here, and request serves the next one.
 * - nil: none was waiting;
 * - false: served and closed; request is free again;
 * - [fd, result, rest]: the connection stays, or Ruby finishes it
 *   (result as #serve's; rest: the bytes read and not served, or nil).
 *   It and request are the caller's (a Connection).
 * accept(2) errors are raised (Errno::ECONNABORTED, EMFILE, ...).
 */
static VALUE loop_accept_serve(VALUE self, VALUE vlistener, VALUE request, VALUE context)
{
  struct first_serve f;
  struct sockaddr_storage peer;
  socklen_t peer_len = sizeof(peer);
  VALUE result, rest = Qnil;
  int state = 0;

  f.l = get_loop(self);
  do {
    f.fd = accept4(NUM2INT(vlistener), (struct sockaddr *)&peer, &peer_len, SOCK_NONBLOCK | SOCK_CLOEXEC);
  } while (f.fd < 0 && errno == EINTR);
  if (f.fd < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Qnil;
    rb_syserr_fail(errno, "accept(2)");
  }
  f.request = request;
  f.context = context;
  f.writer = Qnil;
  f.addr = nw_sockaddr_text(&peer, peer_len);
  f.off = 0;
  f.l->requests = 0;
  /* from here on whatever raises closes the descriptor, unless Ruby made
   * a socket of it, which then owns it */
  result = rb_protect(serve_first, (VALUE)&f, &state);
  if (state) {
    if (NIL_P(f.writer) || !socket_in_ruby(f.writer)) close(f.fd);
    rb_jump_tag(state);
  }
  if (result == Qfalse && !socket_in_ruby(f.writer)) {
    close(f.fd);
    return Qfalse;
  }
  if (f.off < RSTRING_LEN(f.l->in)) rest = rb_str_new(RSTRING_PTR(f.l->in) + f.off, RSTRING_LEN(f.l->in) - f.off);
  return rb_ary_new_from_args(3, INT2FIX(f.fd), next_step(result), rest);
}

void nw_init_request_loop(void)
{
  VALUE c = rb_define_class_under(nw_mNarwhal, "RequestLoop", rb_cObject);
  rb_define_alloc_func(c, loop_alloc);
  rb_define_method(c, "initialize", loop_initialize, 4);
  rb_define_method(c, "serve", loop_serve, 5);
  rb_define_method(c, "accept_serve", loop_accept_serve, 3);
  rb_define_method(c, "requests", loop_requests, 0);
  rb_define_method(c, "arrived", loop_arrived, 0);
  rb_define_const(c, "READ_SIZE", INT2FIX(READ_SIZE));

  sym_keep = ID2SYM(rb_intern("keep"));
  sym_close = ID2SYM(rb_intern("close"));
  id_limits = rb_intern("limits");
  id_call = rb_intern("call");
  id_start = rb_intern("start");
  id_complete = rb_intern("complete");
  id_flags = rb_intern("flags");
  id_finish = rb_intern("finish");
  id_out = rb_intern("out");
  id_pending_p = rb_intern("pending?");
  id_respond_returned = rb_intern("respond_returned");
  id_send_rest = rb_intern("send_rest");
  id_request_started = rb_intern("request_started");
  id_request_finished = rb_intern("request_finished");
  id_iv_hijacked = rb_intern("@hijacked");
  id_iv_io = rb_intern("@io");
  id_attach = rb_intern("attach");
  id_remote_addr_set = rb_intern("remote_addr=");
  id_queue_time = rb_intern("queue_time");
  id_queue_deadline = rb_intern("queue_deadline");
  id_shed = rb_intern("shed");
  key_response_finished = nw_keep_fstring("rack.response_finished");
  key_after_reply = nw_keep_fstring("rack.after_reply");
  key_early_hints = nw_keep_fstring("rack.early_hints");
  key_queue_time = nw_keep_fstring("narwhal.queue_time");
}
