/*
 * A minimal epoll set for a worker's reactor. It exists for one flag that
 * general-purpose selectors do not offer: EPOLLEXCLUSIVE on the shared
 * listening sockets, so that a connection arriving at an idle server wakes
 * one waiting worker instead of all of them. The kernel counts an
 * exclusive wake-up only for a task blocked in epoll_wait on that very set,
 * so the worker must wait here, not in a selector nesting this one.
 *
 * A worker's request threads all wait in the same set (each for one report
 * at a time): a connection's report goes to exactly one of them, which
 * reads, runs and answers the request itself. Only idle threads wait, so a
 * worker takes from a shared listener only while it has one.
 */
#include "narwhal_http.h"

#ifdef __linux__
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>
#include <ruby/thread.h>

/* Events taken from the kernel per wait; more stay ready for the next. */
#define NW_POLLER_MAX_EVENTS 256
/* Descriptors the table has room for before it first grows. */
#define NW_POLLER_TABLE_START 1024
#define NW_POLLER_FD_BITS 32
/*
 * How long the leader holds the reports it got for a thread that serves
 * with the GVL to take over, before it queues for the GVL itself: longer
 * than a short request (hello takes about 20 us), short beside an app's
 * I/O wait, which is when nobody takes them.
 */
#define NW_POLLER_HANDOVER_US 100

/*
 * What the set knows of each descriptor, for threads that share it. A
 * descriptor registered ONESHOT (or reserved) is claimable: each report of
 * it is taken by exactly one thread, which owns it until it re-arms it
 * (#modify) or lets it go (#delete). The generation changes with every
 * registration, and every event carries it, so an event taken for a
 * descriptor that was closed and whose number was reused since is dropped.
 * The table is read and written only with the GVL held.
 */
#define NW_FD_CLAIMABLE 1
#define NW_FD_OWNED 2
#define NW_FD_ADDED 4

struct nw_fd_state {
  uint32_t gen;
  uint8_t flags;
};

struct nw_poller {
  int epfd;
  int waiting; /* threads in #wait now, idle: not holding reports (under held_lock) */
  int64_t *published_waiting; /* a scoreboard field that mirrors it, or NULL */
  VALUE publisher; /* the WorkerSlot that field is in (marked) */
  int owned; /* descriptors a thread owns now */
  /*
   * Held by the one thread blocked in epoll_wait, and on until that thread
   * has the GVL back: the others wait for it here, without the GVL. A
   * report is then held by at most one thread that cannot run it yet;
   * several threads each holding one while they queue for the GVL made a
   * connection wait for every thread ahead of its own (a p99 of tens of ms
   * at threads 5 on two CPUs).
   */
  pthread_mutex_t leader;
  /*
   * The reports the leader got, from the moment epoll_wait returned them
   * until it has the GVL back. While a thread serves with the GVL, the
   * leader holds them for it (NW_POLLER_HANDOVER_US) and that thread takes
   * them over with its next #wait (keep) and serves them itself, so that
   * a report does not wait for the GVL to change hands; the leader, with
   * nothing left, waits in epoll_wait again without having taken the GVL.
   * Written by the leader only, while held_count is 0; taken with the GVL
   * (by the leader itself before it gives up the leader lock); both under
   * held_lock.
   */
  struct epoll_event held[NW_POLLER_MAX_EVENTS];
  int held_count;
  pthread_mutex_t held_lock;
  pthread_cond_t serving_stopped; /* signalled when serving drops */
  /* threads that took a report with #wait and will ask for the next one
   * with keep: only while one does is a take-over waited for */
  int serving;
  /* when a thread last got reports to serve (CLOCK_MONOTONIC, ns): one
   * that got them longer than NW_POLLER_HANDOVER_US ago is in the app
   * (its I/O, or a long request), not about to take more */
  int64_t served_at;
  int shared; /* request threads wait in it (#initialize) */
  size_t table_size;
  struct nw_fd_state *table;
};

struct wait_args {
  struct nw_poller *p;
  int led; /* this thread took the leader lock */
  int idle; /* counted in waiting */
  struct epoll_event *events;
  int max;
  int timeout_ms;
  int result;
  int error;
};

static void poller_free(void *ptr)
{
  struct nw_poller *p = ptr;
  if (p->epfd >= 0) close(p->epfd);
  pthread_mutex_destroy(&p->leader);
  pthread_mutex_destroy(&p->held_lock);
  pthread_cond_destroy(&p->serving_stopped);
  xfree(p->table);
  xfree(p);
}

static size_t poller_memsize(const void *ptr)
{
  const struct nw_poller *p = ptr;
  return sizeof(struct nw_poller) + p->table_size * sizeof(struct nw_fd_state);
}

static void poller_mark(void *ptr)
{
  const struct nw_poller *p = ptr;
  rb_gc_mark(p->publisher);
}

static const rb_data_type_t poller_type = {
  "Narwhal::Poller",
  { poller_mark, poller_free, poller_memsize, NULL, {0} },
  NULL, NULL, RUBY_TYPED_FREE_IMMEDIATELY
};

static VALUE poller_alloc(VALUE klass)
{
  struct nw_poller *p;
  VALUE obj = TypedData_Make_Struct(klass, struct nw_poller, &poller_type, p);
  p->epfd = -1;
  p->publisher = Qnil;
  pthread_condattr_t attr;
  pthread_mutex_init(&p->leader, NULL);
  pthread_mutex_init(&p->held_lock, NULL);
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&p->serving_stopped, &attr);
  pthread_condattr_destroy(&attr);
  return obj;
}

static struct nw_poller *get_poller(VALUE self)
{
  struct nw_poller *p;
  TypedData_Get_Struct(self, struct nw_poller, &poller_type, p);
  if (p->epfd < 0) rb_raise(rb_eIOError, "poller is closed");
  return p;
}

/*
 * #initialize(shared = false): shared when request threads all wait in it;
 * only then are the leader's reports held for a serving thread.
 */
static VALUE poller_init(int argc, VALUE *argv, VALUE self)
{
  struct nw_poller *p;
  VALUE shared;
  rb_scan_args(argc, argv, "01", &shared);
  TypedData_Get_Struct(self, struct nw_poller, &poller_type, p);
  p->shared = RTEST(shared);
  p->epfd = epoll_create1(EPOLL_CLOEXEC);
  if (p->epfd < 0) rb_sys_fail("epoll_create1");
  return self;
}

/* The table entry of fd, growing the table to hold it. */
static struct nw_fd_state *fd_state(struct nw_poller *p, int fd)
{
  size_t size;
  if (fd < 0) rb_raise(rb_eArgError, "negative descriptor %d", fd);
  if ((size_t)fd >= p->table_size) {
    size = p->table_size ? p->table_size : NW_POLLER_TABLE_START;
    while (size <= (size_t)fd) size *= 2;
    REALLOC_N(p->table, struct nw_fd_state, size);
    memset(p->table + p->table_size, 0, (size - p->table_size) * sizeof(struct nw_fd_state));
    p->table_size = size;
  }
  return &p->table[fd];
}

static uint64_t event_data(int fd, const struct nw_fd_state *s)
{
  return (uint64_t)(uint32_t)fd | ((uint64_t)s->gen << NW_POLLER_FD_BITS);
}

static void ctl(struct nw_poller *p, int op, int fd, unsigned int events, const struct nw_fd_state *s,
                const char *what)
{
  struct epoll_event ev;
  memset(&ev, 0, sizeof(ev));
  ev.events = events;
  ev.data.u64 = event_data(fd, s);
  if (epoll_ctl(p->epfd, op, fd, &ev) < 0) rb_sys_fail(what);
}

/* Sets the flags of s, counting the descriptors owned. */
static void set_flags(struct nw_poller *p, struct nw_fd_state *s, uint8_t flags)
{
  p->owned += ((flags & NW_FD_OWNED) != 0) - ((s->flags & NW_FD_OWNED) != 0);
  s->flags = flags;
}

/* A new registration of fd: events for an earlier one become stale. */
static struct nw_fd_state *fresh_state(struct nw_poller *p, int fd, uint8_t flags)
{
  struct nw_fd_state *s = fd_state(p, fd);
  s->gen++;
  set_flags(p, s, flags);
  return s;
}

/*
 * #add(fd, events): watch fd for the events (READ, WRITE, EXCLUSIVE,
 * ONESHOT bits). A ONESHOT descriptor is claimable (see the table above).
 */
static VALUE poller_add(VALUE self, VALUE vfd, VALUE vevents)
{
  struct nw_poller *p = get_poller(self);
  int fd = NUM2INT(vfd);
  unsigned int events = NUM2UINT(vevents);
  struct nw_fd_state *s = fresh_state(p, fd, (events & EPOLLONESHOT) ? NW_FD_CLAIMABLE : 0);
  ctl(p, EPOLL_CTL_ADD, fd, events, s, "epoll_ctl(ADD)");
  s->flags |= NW_FD_ADDED; /* not before: a refused add leaves fd out of the set */
  return Qnil;
}

/*
 * #reserve(fd): fd is claimable and owned by the caller from now on, but
 * not in the set yet: the first #modify adds it. A thread that accepted a
 * connection serves its first request before any other can see it.
 */
static VALUE poller_reserve(VALUE self, VALUE vfd)
{
  fresh_state(get_poller(self), NUM2INT(vfd), NW_FD_CLAIMABLE | NW_FD_OWNED);
  return Qnil;
}

/*
 * #modify(fd, events): change what fd is watched for; with ONESHOT it also
 * re-arms fd and gives up the caller's claim on it (first, so that the
 * thread the next report wakes can claim it). Safe from any thread, also
 * while others wait in #wait.
 */
static VALUE poller_modify(VALUE self, VALUE vfd, VALUE vevents)
{
  struct nw_poller *p = get_poller(self);
  int fd = NUM2INT(vfd);
  struct nw_fd_state *s = fd_state(p, fd);
  int op = (s->flags & NW_FD_ADDED) ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
  set_flags(p, s, (uint8_t)(s->flags & ~NW_FD_OWNED));
  ctl(p, op, fd, NUM2UINT(vevents), s, op == EPOLL_CTL_MOD ? "epoll_ctl(MOD)" : "epoll_ctl(ADD)");
  s->flags |= NW_FD_ADDED;
  return Qnil;
}

/* #delete(fd): stop watching fd (a no-op if it is already gone, or was
 * only reserved: a connection answered and closed before it first waited
 * costs no epoll_ctl) */
static VALUE poller_delete(VALUE self, VALUE vfd)
{
  struct nw_poller *p = get_poller(self);
  int fd = NUM2INT(vfd);
  struct epoll_event ev;
  int added = (fd_state(p, fd)->flags & NW_FD_ADDED) != 0;
  fresh_state(p, fd, 0);
  if (!added) return Qnil;
  memset(&ev, 0, sizeof(ev));
  if (epoll_ctl(p->epfd, EPOLL_CTL_DEL, fd, &ev) < 0 && errno != ENOENT && errno != EBADF)
    rb_sys_fail("epoll_ctl(DEL)");
  return Qnil;
}

/*
 * #claim(fd) -> true or false: takes a claimable fd that no thread owns
 * (the sweep, closing an idle connection); false when a thread has it.
 */
static VALUE poller_claim(VALUE self, VALUE vfd)
{
  struct nw_poller *p = get_poller(self);
  int fd = NUM2INT(vfd);
  struct nw_fd_state *s;
  if (fd < 0 || (size_t)fd >= p->table_size) return Qfalse;
  s = &p->table[fd];
  if (!(s->flags & NW_FD_CLAIMABLE) || (s->flags & NW_FD_OWNED)) return Qfalse;
  set_flags(p, s, s->flags | NW_FD_OWNED);
  return Qtrue;
}

/* #owned?(fd): a thread has claimed fd */
static VALUE poller_owned_p(VALUE self, VALUE vfd)
{
  struct nw_poller *p = get_poller(self);
  int fd = NUM2INT(vfd);
  if (fd < 0 || (size_t)fd >= p->table_size) return Qfalse;
  return (p->table[fd].flags & NW_FD_OWNED) ? Qtrue : Qfalse;
}

static int64_t now_ns(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* The time now plus us microseconds, on the clock of the hand-over condition. */
static struct timespec deadline_in(long us)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  t.tv_nsec += us * 1000L;
  if (t.tv_nsec >= 1000000000L) {
    t.tv_sec += t.tv_nsec / 1000000000L;
    t.tv_nsec %= 1000000000L;
  }
  return t;
}

/*
 * Changes the count of threads waiting idle by delta and mirrors it into
 * the scoreboard (siblings shed to a worker with one): under held_lock, so
 * that the mirror is written in the order of the changes.
 */
static void count_waiting(struct nw_poller *p, int delta)
{
  pthread_mutex_lock(&p->held_lock);
  p->waiting += delta;
  if (p->published_waiting) __atomic_store_n(p->published_waiting, (int64_t)p->waiting, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&p->held_lock);
}

/*
 * The leader's reports are held for a serving thread to take over; true
 * when one did (all of them) within NW_POLLER_HANDOVER_US, false when none
 * did or none serves any more (the leader then runs them itself, once it
 * has the GVL). Waited for only while a thread got reports within that
 * time: one that got its last longer ago is in the app's I/O or in a long
 * request, and waiting for it would only delay the report (and show the
 * leader as idle to the siblings meanwhile). The taker does not wake the leader: that would cost it a
 * system call for every report taken.
 */
static int handed_over(struct wait_args *a)
{
  struct nw_poller *p = a->p;
  const struct epoll_event *events = a->events;
  int n = a->result;
  struct timespec until;
  int taken;
  int quick;
  /* with reports in hand the leader is not idle, until they are taken */
  count_waiting(p, -1);
  a->idle = 0;
  quick = now_ns() - __atomic_load_n(&p->served_at, __ATOMIC_ACQUIRE) < NW_POLLER_HANDOVER_US * 1000LL;
  pthread_mutex_lock(&p->held_lock);
  memcpy(p->held, events, (size_t)n * sizeof(struct epoll_event));
  __atomic_store_n(&p->held_count, n, __ATOMIC_RELEASE);
  until = deadline_in(NW_POLLER_HANDOVER_US);
  while (quick && p->held_count > 0 && __atomic_load_n(&p->serving, __ATOMIC_ACQUIRE) > 0)
    if (pthread_cond_timedwait(&p->serving_stopped, &p->held_lock, &until) != 0) break;
  taken = p->held_count == 0;
  pthread_mutex_unlock(&p->held_lock);
  if (taken) {
    count_waiting(p, 1);
    a->idle = 1;
  }
  return taken;
}

/*
 * The leader: waits in epoll_wait; what it gets, a serving thread may take
 * over, and then the leader waits again, all without the GVL. It returns
 * (to queue for the GVL) with reports no thread took, on a timeout, or
 * when interrupted.
 */
static void *wait_nogvl(void *ptr)
{
  struct wait_args *a = ptr;
  pthread_mutex_lock(&a->p->leader);
  a->led = 1;
  do {
    a->result = epoll_wait(a->p->epfd, a->events, a->max, a->timeout_ms);
    a->error = errno;
  } while (a->result > 0 && a->p->shared && handed_over(a));
  return NULL;
}

/*
 * Takes the reports the leader holds into events (at most max; the rest
 * stay held), with the GVL held; their count.
 */
static int take_held(struct nw_poller *p, struct epoll_event *events, int max)
{
  int n;
  if (__atomic_load_n(&p->held_count, __ATOMIC_ACQUIRE) <= 0) return 0;
  pthread_mutex_lock(&p->held_lock);
  n = p->held_count;
  if (n > max) {
    memcpy(events, p->held, (size_t)max * sizeof(struct epoll_event));
    memmove(p->held, p->held + max, (size_t)(n - max) * sizeof(struct epoll_event));
    p->held_count = n - max;
    n = max;
  } else if (n > 0) {
    memcpy(events, p->held, (size_t)n * sizeof(struct epoll_event));
    __atomic_store_n(&p->held_count, 0, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&p->held_lock);
  return n < 0 ? 0 : n;
}

/* A serving thread stops serving (it is about to wait): a leader holding
 * reports for it to take over runs them itself. */
static void stop_serving(struct nw_poller *p)
{
  pthread_mutex_lock(&p->held_lock);
  if (p->serving > 0) __atomic_sub_fetch(&p->serving, 1, __ATOMIC_RELEASE);
  pthread_cond_signal(&p->serving_stopped);
  pthread_mutex_unlock(&p->held_lock);
}

/* Whether the caller may act on the event: current, and claimed if claimable. */
static int take_event(struct nw_poller *p, const struct epoll_event *ev, int *fd)
{
  struct nw_fd_state *s;
  *fd = (int)(uint32_t)ev->data.u64;
  if ((size_t)*fd >= p->table_size) return 0;
  s = &p->table[*fd];
  if (s->gen != (uint32_t)(ev->data.u64 >> NW_POLLER_FD_BITS)) return 0; /* stale */
  if (!(s->flags & NW_FD_CLAIMABLE)) return 1;
  if (s->flags & NW_FD_OWNED) return 0;
  set_flags(p, s, s->flags | NW_FD_OWNED);
  return 1;
}


/*
 * #wait(timeout_seconds, ready, max = 256, keep = false) -> count
 *
 * Blocks up to timeout (nil: forever) with the GVL released and stores the
 * ready descriptors in ready[0...count] (an Array reused by the caller: no
 * allocation). Claimable ones are the caller's now; events no longer
 * current, or for a descriptor another thread owns, are left out. Threads
 * may wait at once: the kernel gives each report to one of them. A signal
 * interrupts the wait and returns 0 after Ruby ran its handler.
 */
static VALUE poller_wait(int argc, VALUE *argv, VALUE self)
{
  struct epoll_event events[NW_POLLER_MAX_EVENTS];
  struct wait_args a;
  VALUE timeout, ready, vmax, keep;
  int i, count = 0, fd, serving;
  rb_scan_args(argc, argv, "22", &timeout, &ready, &vmax, &keep);
  Check_Type(ready, T_ARRAY);
  a.p = get_poller(self);
  serving = a.p->shared && RTEST(keep);
  a.events = events;
  a.max = NIL_P(vmax) ? NW_POLLER_MAX_EVENTS : NUM2INT(vmax);
  if (a.max < 1 || a.max > NW_POLLER_MAX_EVENTS) rb_raise(rb_eArgError, "max events out of 1..%d", NW_POLLER_MAX_EVENTS);
  a.timeout_ms = NIL_P(timeout) ? -1 : (int)(NUM2DBL(timeout) * 1000.0);
  a.result = 0;
  /* keep (the caller got a report from its last #wait and served it): a
   * report the leader holds, else one already ready, is taken without
   * giving up the GVL, so that a thread with work goes on instead of
   * waking another */
  if (serving) {
    a.result = take_held(a.p, events, a.max);
    if (a.result == 0) {
      a.result = epoll_wait(a.p->epfd, events, a.max, 0);
      a.error = errno;
    }
  }
  if (a.result == 0) {
    if (serving) stop_serving(a.p);
    serving = 0;
    a.led = 0;
    a.error = EINTR; /* if an interrupt came first, wait_nogvl does not run */
    count_waiting(a.p, 1);
    a.idle = 1;
    /* the variant that does not raise on its way back: the leader lock is
     * given up first, whatever happens next */
    rb_thread_call_without_gvl2(wait_nogvl, &a, RUBY_UBF_IO, NULL);
    if (a.led) {
      /* what no serving thread took over while this one waited for the GVL */
      if (a.result > 0 && a.p->shared) a.result = take_held(a.p, events, a.max);
      pthread_mutex_unlock(&a.p->leader);
    }
    if (a.idle) count_waiting(a.p, -1);
    /* trap handlers, Thread#raise and #kill now, before anything is
     * claimed: a claim not handed to the caller would never be given back */
    rb_thread_check_ints();
  }
  if (a.result < 0) {
    if (a.error != EINTR) {
      errno = a.error;
      rb_sys_fail("epoll_wait");
    }
    a.result = 0;
  }
  if (a.p->epfd >= 0)
    for (i = 0; i < a.result; i++)
      if (take_event(a.p, &events[i], &fd)) rb_ary_store(ready, count++, INT2FIX(fd));
  /* the caller serves on and comes back with keep, or waits next time */
  if (!a.p->shared) return INT2FIX(count);
  if (count > 0) __atomic_store_n(&a.p->served_at, now_ns(), __ATOMIC_RELEASE);
  if (count > 0 && !serving) __atomic_add_fetch(&a.p->serving, 1, __ATOMIC_RELEASE);
  else if (count == 0 && serving) stop_serving(a.p);
  return INT2FIX(count);
}

/* #owned -> Integer: descriptors a thread has claimed (or reserved) */
static VALUE poller_owned(VALUE self)
{
  return INT2FIX(get_poller(self)->owned);
}

/* #publish_waiting(worker_slot): mirror #waiting into the worker's
 * scoreboard slot, where siblings read whether it has idle threads */
static VALUE poller_publish_waiting(VALUE self, VALUE slot)
{
  struct nw_poller *p = get_poller(self);
  p->published_waiting = nw_worker_slot_waiting(slot);
  p->publisher = slot;
  count_waiting(p, 0);
  return Qnil;
}

/* #held -> Integer: reports the waiting thread got and holds for a
 * serving thread to take over (threads sharing the set) */
static VALUE poller_held(VALUE self)
{
  return INT2FIX(__atomic_load_n(&get_poller(self)->held_count, __ATOMIC_ACQUIRE));
}

/*
 * #stop_serving: the caller got reports from its last #wait and will not
 * call #wait again (its loop ends, or the app ended its thread): it no
 * longer counts as a thread that takes over what the waiting one gets.
 * Also on a closed set.
 */
static VALUE poller_stop_serving(VALUE self)
{
  struct nw_poller *p;
  TypedData_Get_Struct(self, struct nw_poller, &poller_type, p);
  if (p->shared) stop_serving(p);
  return Qnil;
}

/* #serving -> Integer: threads that got reports from their last #wait
 * and will ask for the next with keep */
static VALUE poller_serving(VALUE self)
{
  struct nw_poller *p;
  TypedData_Get_Struct(self, struct nw_poller, &poller_type, p);
  return INT2FIX(__atomic_load_n(&p->serving, __ATOMIC_ACQUIRE));
}

/* #waiting -> Integer: threads blocked in #wait now */
static VALUE poller_waiting(VALUE self)
{
  return INT2FIX(__atomic_load_n(&get_poller(self)->waiting, __ATOMIC_ACQUIRE));
}

/*
 * #pending? -> true or false: reports are ready that no thread has taken
 * (an epoll set is itself readable while it has some).
 */
static VALUE poller_pending_p(VALUE self)
{
  struct pollfd pfd;
  pfd.fd = get_poller(self)->epfd;
  pfd.events = POLLIN;
  pfd.revents = 0;
  return poll(&pfd, 1, 0) > 0 ? Qtrue : Qfalse;
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
  rb_define_method(c, "initialize", poller_init, -1);
  rb_define_const(c, "READ", UINT2NUM(EPOLLIN));
  rb_define_const(c, "MAX_EVENTS", INT2FIX(NW_POLLER_MAX_EVENTS));
  rb_define_const(c, "WRITE", UINT2NUM(EPOLLOUT));
  /* of the set's waiting on a shared listener, one is woken per event */
  rb_define_const(c, "EXCLUSIVE", UINT2NUM(EPOLLEXCLUSIVE));
  /* reported once, then disarmed until #modify re-arms it */
  rb_define_const(c, "ONESHOT", UINT2NUM(EPOLLONESHOT));
  rb_define_method(c, "add", poller_add, 2);
  rb_define_method(c, "reserve", poller_reserve, 1);
  rb_define_method(c, "modify", poller_modify, 2);
  rb_define_method(c, "delete", poller_delete, 1);
  rb_define_method(c, "claim", poller_claim, 1);
  rb_define_method(c, "owned?", poller_owned_p, 1);
  rb_define_method(c, "wait", poller_wait, -1);
  rb_define_method(c, "waiting", poller_waiting, 0);
  rb_define_method(c, "held", poller_held, 0);
  rb_define_method(c, "serving", poller_serving, 0);
  rb_define_method(c, "stop_serving", poller_stop_serving, 0);
  rb_define_method(c, "publish_waiting", poller_publish_waiting, 1);
  rb_define_method(c, "owned", poller_owned, 0);
  rb_define_method(c, "pending?", poller_pending_p, 0);
  rb_define_method(c, "close", poller_close, 0);
#endif
}
