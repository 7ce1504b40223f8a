/*
 * A minimal epoll set for a worker's reactor. It exists for one flag that
 * general-purpose selectors do not offer: EPOLLEXCLUSIVE on the shared
 * listening sockets, so that a connection arriving at an idle server wakes
 * one waiting worker instead of all of them. The kernel counts an
 * exclusive wake-up only for a task blocked in epoll_wait on that very set,
 * so the worker must wait here, not in a selector nesting this one.
 */
#include "narwhal_http.h"

#ifdef __linux__
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <ruby/thread.h>

/* Events taken from the kernel per wait; more stay ready for the next. */
#define NW_POLLER_MAX_EVENTS 256

struct nw_poller {
  int epfd;
  struct epoll_event events[NW_POLLER_MAX_EVENTS];
};

struct wait_args {
  struct nw_poller *p;
  int timeout_ms;
  int result;
  int error;
};

static void poller_free(void *ptr)
{
  struct nw_poller *p = ptr;
  if (p->epfd >= 0) close(p->epfd);
  xfree(p);
}

static size_t poller_memsize(const void *ptr)
{
  return sizeof(struct nw_poller);
}

static const rb_data_type_t poller_type = {
  "Narwhal::Poller",
  { NULL, poller_free, poller_memsize, NULL, {0} },
  NULL, NULL, RUBY_TYPED_FREE_IMMEDIATELY
};

static VALUE poller_alloc(VALUE klass)
{
  struct nw_poller *p;
  VALUE obj = TypedData_Make_Struct(klass, struct nw_poller, &poller_type, p);
  p->epfd = -1;
  return obj;
}

static struct nw_poller *get_poller(VALUE self)
{
  struct nw_poller *p;
  TypedData_Get_Struct(self, struct nw_poller, &poller_type, p);
  if (p->epfd < 0) rb_raise(rb_eIOError, "poller is closed");
  return p;
}

static VALUE poller_init(VALUE self)
{
  struct nw_poller *p;
  TypedData_Get_Struct(self, struct nw_poller, &poller_type, p);
  p->epfd = epoll_create1(EPOLL_CLOEXEC);
  if (p->epfd < 0) rb_sys_fail("epoll_create1");
  return self;
}

static VALUE poller_ctl(VALUE self, int op, VALUE vfd, VALUE events, const char *what)
{
  struct nw_poller *p = get_poller(self);
  struct epoll_event ev;
  memset(&ev, 0, sizeof(ev));
  ev.events = NUM2UINT(events);
  ev.data.fd = NUM2INT(vfd);
  if (epoll_ctl(p->epfd, op, ev.data.fd, &ev) < 0) rb_sys_fail(what);
  return Qnil;
}

/* #add(fd, events): watch fd for the events (READ, WRITE, EXCLUSIVE, ONESHOT bits) */
static VALUE poller_add(VALUE self, VALUE vfd, VALUE events)
{
  return poller_ctl(self, EPOLL_CTL_ADD, vfd, events, "epoll_ctl(ADD)");
}

/*
 * #modify(fd, events): change what fd is watched for; with ONESHOT it also
 * re-arms fd. Safe from any thread, also while another waits in #wait.
 */
static VALUE poller_modify(VALUE self, VALUE vfd, VALUE events)
{
  return poller_ctl(self, EPOLL_CTL_MOD, vfd, events, "epoll_ctl(MOD)");
}

/* #delete(fd): stop watching fd (a no-op if it is already gone) */
static VALUE poller_delete(VALUE self, VALUE vfd)
{
  struct nw_poller *p = get_poller(self);
  struct epoll_event ev;
  memset(&ev, 0, sizeof(ev));
  if (epoll_ctl(p->epfd, EPOLL_CTL_DEL, NUM2INT(vfd), &ev) < 0 && errno != ENOENT && errno != EBADF)
    rb_sys_fail("epoll_ctl(DEL)");
  return Qnil;
}

static void *wait_nogvl(void *ptr)
{
  struct wait_args *a = ptr;
  a->result = epoll_wait(a->p->epfd, a->p->events, NW_POLLER_MAX_EVENTS, a->timeout_ms);
  a->error = errno;
  return NULL;
}

/*
 * #wait(timeout_seconds, ready) -> count
 *
 * Blocks up to timeout (nil: forever) and stores the ready descriptors in
 * ready[0...count] (an Array reused by the caller: no allocation). A signal
 * interrupts the wait and returns 0 after Ruby ran its handler.
 */
static VALUE poller_wait(VALUE self, VALUE timeout, VALUE ready)
{
  struct wait_args a;
  int i;
  Check_Type(ready, T_ARRAY);
  a.p = get_poller(self);
  a.timeout_ms = NIL_P(timeout) ? -1 : (int)(NUM2DBL(timeout) * 1000.0);
  rb_thread_call_without_gvl(wait_nogvl, &a, RUBY_UBF_IO, NULL);
  if (a.result < 0) {
    if (a.error != EINTR) {
      errno = a.error;
      rb_sys_fail("epoll_wait");
    }
    a.result = 0;
  }
  for (i = 0; i < a.result; i++) rb_ary_store(ready, i, INT2FIX(a.p->events[i].data.fd));
  rb_thread_check_ints(); /* run trap handlers now */
  return INT2FIX(a.result);
}

static VALUE poller_close(VALUE self)
{
  struct nw_poller *p;
  TypedData_Get_Struct(self, struct nw_poller, &poller_type, p);
  if (p->epfd >= 0) close(p->epfd);
  p->epfd = -1;
  return Qnil;
}
#endif

void nw_init_poller(void)
{
#ifdef __linux__
  VALUE c = rb_define_class_under(nw_mNarwhal, "Poller", rb_cObject);
  rb_define_alloc_func(c, poller_alloc);
  rb_define_method(c, "initialize", poller_init, 0);
  rb_define_const(c, "READ", UINT2NUM(EPOLLIN));
  rb_define_const(c, "WRITE", UINT2NUM(EPOLLOUT));
  /* of the set's waiting on a shared listener, one is woken per event */
  rb_define_const(c, "EXCLUSIVE", UINT2NUM(EPOLLEXCLUSIVE));
  /* reported once, then disarmed until #modify re-arms it */
  rb_define_const(c, "ONESHOT", UINT2NUM(EPOLLONESHOT));
  rb_define_method(c, "add", poller_add, 2);
  rb_define_method(c, "modify", poller_modify, 2);
  rb_define_method(c, "delete", poller_delete, 1);
  rb_define_method(c, "wait", poller_wait, 2);
  rb_define_method(c, "close", poller_close, 0);
#endif
}
