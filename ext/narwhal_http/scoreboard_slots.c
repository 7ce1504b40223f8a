/*
 * Narwhal::Scoreboard::ThreadSlot and ::WorkerSlot: what a worker writes
 * through. Each holds a pointer into the scoreboard's mapping, found (and
 * bounds-checked) once when the slot object is made, so the per-request
 * calls take no arguments, check nothing and allocate nothing. Each also
 * holds the Scoreboard itself, marked for the GC: the mapping lives as long
 * as any slot object does.
 */
#include "narwhal_http.h"
#include "scoreboard.h"
#include <sys/syscall.h>
#include <unistd.h>

struct nw_thread_slot {
  struct nw_sb_thread *slot;
  struct nw_sb_worker *worker; /* the slot's worker: its histograms */
  VALUE board;
};

struct nw_worker_slot {
  struct nw_sb_worker *slot;
  VALUE board;
  VALUE nr;
};

static VALUE cThreadSlot, cWorkerSlot;


static void thread_slot_mark(void *ptr)
{
  struct nw_thread_slot *s = ptr;
  rb_gc_mark_movable(s->board);
}

static void thread_slot_compact(void *ptr)
{
  struct nw_thread_slot *s = ptr;
  s->board = rb_gc_location(s->board);
}

static size_t thread_slot_memsize(const void *ptr)
{
  return sizeof(struct nw_thread_slot);
}

static const rb_data_type_t thread_slot_type = {
  "Narwhal::Scoreboard::ThreadSlot",
  { thread_slot_mark, RUBY_TYPED_DEFAULT_FREE, thread_slot_memsize, thread_slot_compact, {0} },
  NULL, NULL, RUBY_TYPED_FREE_IMMEDIATELY
};

static void worker_slot_mark(void *ptr)
{
  struct nw_worker_slot *s = ptr;
  rb_gc_mark_movable(s->board);
  rb_gc_mark_movable(s->nr);
}

static void worker_slot_compact(void *ptr)
{
  struct nw_worker_slot *s = ptr;
  s->board = rb_gc_location(s->board);
  s->nr = rb_gc_location(s->nr);
}

static size_t worker_slot_memsize(const void *ptr)
{
  return sizeof(struct nw_worker_slot);
}

static const rb_data_type_t worker_slot_type = {
  "Narwhal::Scoreboard::WorkerSlot",
  { worker_slot_mark, RUBY_TYPED_DEFAULT_FREE, worker_slot_memsize, worker_slot_compact, {0} },
  NULL, NULL, RUBY_TYPED_FREE_IMMEDIATELY
};

/* Where a worker's Poller writes how many of its threads wait (a
 * WorkerSlot's field, alive as long as the slot object is). */
int64_t *nw_worker_slot_waiting(VALUE slot)
{
  struct nw_worker_slot *s = rb_check_typeddata(slot, &worker_slot_type);
  return &s->slot->waiting;
}

VALUE nw_thread_slot_new(VALUE board, struct nw_sb_thread *slot, struct nw_sb_worker *worker)
{
  struct nw_thread_slot *s;
  VALUE obj = TypedData_Make_Struct(cThreadSlot, struct nw_thread_slot, &thread_slot_type, s);
  s->slot = slot;
  s->worker = worker;
  s->board = board;
  return obj;
}

VALUE nw_worker_slot_new(VALUE board, VALUE nr)
{
  struct nw_worker_slot *s;
  VALUE obj = TypedData_Make_Struct(cWorkerSlot, struct nw_worker_slot, &worker_slot_type, s);
  s->slot = nw_scoreboard_worker(board, nr);
  s->board = board;
  s->nr = nr;
  return obj;
}

/* Only this file makes these objects (their classes have no allocator), so
 * self is always one: no type check on the request path. */
static struct nw_thread_slot *thread_slot_of(VALUE self)
{
  return RTYPEDDATA_DATA(self);
}

static struct nw_sb_thread *thread_slot(VALUE self)
{
  return thread_slot_of(self)->slot;
}

static struct nw_worker_slot *worker_slot(VALUE self)
{
  return RTYPEDDATA_DATA(self);
}

/* ThreadSlot#request_started(method = nil, path = nil): this thread began
 * a request now. method and path (Strings, e.g. the env's REQUEST_METHOD
 * and PATH_INFO; anything else counts as none) are copied, truncated, so
 * that the master can name the request: nothing is allocated. */
static VALUE thread_slot_started(int argc, VALUE *argv, VALUE self)
{
  VALUE method = argc > 0 ? argv[0] : Qnil, path = argc > 1 ? argv[1] : Qnil, fd = argc > 2 ? argv[2] : Qnil;
  if (argc > 3) rb_error_arity(argc, 0, 3);
  if (!RB_TYPE_P(method, T_STRING)) method = Qnil;
  if (!RB_TYPE_P(path, T_STRING)) path = Qnil;
  nw_sb_request_started(thread_slot(self), NIL_P(method) ? NULL : RSTRING_PTR(method),
                        NIL_P(method) ? 0 : (size_t)RSTRING_LEN(method), NIL_P(path) ? NULL : RSTRING_PTR(path),
                        NIL_P(path) ? 0 : (size_t)RSTRING_LEN(path), FIXNUM_P(fd) ? FIX2INT(fd) : -1);
  return Qnil;
}

/* ThreadSlot#bind_thread!: the calling thread is the one that serves
 * through this slot; its kernel id goes in it, for the master's signal
 * asking for its backtrace near timeout (BacktraceSignal). The thread
 * holds the slot object (a thread variable) for as long as it is bound,
 * so that the scoreboard, and the mapping bound_slot points into, stays
 * alive: a thread that outlives the Server it was bound for (built on it,
 * then dropped) would otherwise write to unmapped memory at its next
 * hijack. */
static __thread struct nw_sb_thread *bound_slot; /* the calling thread's, once bound */
static ID id_thread_variable_set;
static VALUE sym_bound_slot;

struct nw_sb_thread *nw_bound_thread_slot(void) { return bound_slot; }

static VALUE thread_slot_bind_thread(VALUE self)
{
  rb_funcall(rb_thread_current(), id_thread_variable_set, 2, sym_bound_slot, self);
  bound_slot = thread_slot(self);
  __atomic_store_n(&bound_slot->tid, (int32_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
  return Qnil;
}

/* ThreadSlot.responding!: #responding! of the calling thread's bound slot
 * (nothing when it has none), for who does not hold it: a hijack */
static VALUE thread_slot_s_responding(VALUE klass)
{
  if (bound_slot) nw_sb_responding(bound_slot);
  return Qnil;
}

/* ThreadSlot#responding!: the current request's response begins (before
 * its first byte): the master leaves its connection alone at timeout */
static VALUE thread_slot_responding(VALUE self)
{
  nw_sb_responding(thread_slot(self));
  return Qnil;
}

/* ThreadSlot#request_finished: this thread is idle again, one request
 * more, its duration in the worker's REQUEST_DURATION histogram */
static VALUE thread_slot_finished(VALUE self)
{
  struct nw_thread_slot *s = thread_slot_of(self);
  nw_sb_request_finished(s->slot, s->worker);
  return Qnil;
}

/* seconds as the histograms' microseconds, or -1 when it is no wait:
 * negative, NaN (!(s >= 0) is also true for it) or beyond any (the bound
 * keeps the cast defined) */
static int64_t wait_us(double s)
{
  if (!(s >= 0) || s > 1e9) return -1;
  return (int64_t)(s * 1e6 + 0.5);
}

/*
 * ThreadSlot#queue_time(seconds, kind) -> true, or false when ignored: the
 * current request waited this long before the app started; goes into the
 * worker's histogram kind (Scoreboard::QUEUE_TIME_HEADER: since the proxy's
 * X-Request-Start; QUEUE_TIME_KERNEL: since its bytes arrived). A Float (or
 * Integer) >= 0; anything else, NaN or infinity is ignored. Allocates
 * nothing (a Float argument is an immediate).
 */
static VALUE thread_slot_queue_time(VALUE self, VALUE seconds, VALUE vkind)
{
  int kind = NUM2INT(vkind);
  int64_t us;
  if (kind != NW_SB_QUEUE_TIME_HEADER && kind != NW_SB_QUEUE_TIME_KERNEL)
    rb_raise(rb_eArgError, "not a queue time histogram: %d", kind);
  if (RB_FLOAT_TYPE_P(seconds)) us = wait_us(RFLOAT_VALUE(seconds));
  else if (FIXNUM_P(seconds)) us = wait_us((double)FIX2LONG(seconds));
  else return Qfalse;
  if (us < 0) return Qfalse;
  nw_sb_observe(&thread_slot_of(self)->worker->histograms[kind], us);
  return Qtrue;
}

/* For the request loop (request_loop.c): #request_started and
 * #request_finished when slot is a ThreadSlot; 0 (nothing done) when it
 * is some other object, which the loop then calls as Ruby would. */
int nw_thread_slot_started(VALUE slot, VALUE method, VALUE path, int fd)
{
  if (!rb_typeddata_is_kind_of(slot, &thread_slot_type)) return 0;
  thread_slot_started(3, (VALUE[]){method, path, INT2FIX(fd)}, slot);
  return 1;
}

int nw_thread_slot_responding(VALUE slot)
{
  if (!rb_typeddata_is_kind_of(slot, &thread_slot_type)) return 0;
  nw_sb_responding(thread_slot(slot));
  return 1;
}

/* For the request loop: a kernel (or header) queue time into slot's
 * worker histogram; 0 (nothing done) when slot is no ThreadSlot. */
int nw_thread_slot_queue_time(VALUE slot, int kind, double seconds)
{
  int64_t us;
  if (!rb_typeddata_is_kind_of(slot, &thread_slot_type)) return 0;
  us = wait_us(seconds);
  if (us >= 0) nw_sb_observe(&thread_slot_of(slot)->worker->histograms[kind], us);
  return 1;
}

int nw_thread_slot_finished(VALUE slot)
{
  if (!rb_typeddata_is_kind_of(slot, &thread_slot_type)) return 0;
  thread_slot_finished(slot);
  return 1;
}

/* ThreadSlot#busy_for -> Float seconds on the current request, or nil when idle */
static VALUE thread_slot_busy_for(VALUE self)
{
  int64_t started = nw_sb_started_us(thread_slot(self));
  if (!started) return Qnil;
  return DBL2NUM((double)(nw_sb_now_us() - started) / 1e6);
}

/* ThreadSlot#requests -> Integer: requests this thread finished */
static VALUE thread_slot_requests(VALUE self)
{
  return LL2NUM(nw_sb_requests(thread_slot(self)));
}

static enum nw_sb_counter counter_of(VALUE vcounter)
{
  long c = NUM2LONG(vcounter);
  if (c < 0 || c >= NW_SB_COUNTERS) rb_raise(rb_eIndexError, "no scoreboard counter %ld", c);
  return (enum nw_sb_counter)c;
}

/* WorkerSlot#count(counter): one more of Scoreboard::CONNECTIONS_ACCEPTED... */
static VALUE worker_slot_count(VALUE self, VALUE vcounter)
{
  nw_sb_count(worker_slot(self)->slot, counter_of(vcounter));
  return Qnil;
}

/* WorkerSlot#counter(counter) -> Integer */
static VALUE worker_slot_counter(VALUE self, VALUE vcounter)
{
  enum nw_sb_counter c = counter_of(vcounter);
  return LL2NUM(__atomic_load_n(&worker_slot(self)->slot->counters[c], __ATOMIC_RELAXED));
}

/* WorkerSlot#pid -> Integer, 0 when none was recorded (Scoreboard#reset) */
static VALUE worker_slot_pid(VALUE self)
{
  return LL2NUM(__atomic_load_n(&worker_slot(self)->slot->pid, __ATOMIC_ACQUIRE));
}

/*
 * WorkerSlot#accepting = threads: whether siblings may leave connections to
 * it, and how many of its thread sub-slots are threads (Integer; true: all
 * of them; false or nil: it accepts nothing)
 */
static VALUE worker_slot_set_accepting(VALUE self, VALUE flag)
{
  int64_t threads = 0;
  if (FIXNUM_P(flag)) {
    threads = FIX2LONG(flag);
    if (threads < 0) rb_raise(rb_eArgError, "negative thread count %ld", (long)threads);
  } else if (RTEST(flag)) {
    threads = NW_SB_MAX_THREADS;
  }
  __atomic_store_n(&worker_slot(self)->slot->accepting, threads, __ATOMIC_RELEASE);
  return flag;
}

/* WorkerSlot#queued = n: requests read and waiting for a thread (the pool
 * writes it as its queue changes) */
static VALUE worker_slot_set_queued(VALUE self, VALUE count)
{
  __atomic_store_n(&worker_slot(self)->slot->queued, NUM2LL(count), __ATOMIC_RELEASE);
  return count;
}

/* WorkerSlot#connections = n: connections the worker holds (siblings let
 * a crowd in to whichever holds fewest) */
static VALUE worker_slot_set_connections(VALUE self, VALUE count)
{
  __atomic_store_n(&worker_slot(self)->slot->connections, NUM2LL(count), __ATOMIC_RELEASE);
  return count;
}

/* WorkerSlot#serving = true: the worker finished booting (the master
 * tells a booting worker from one that serves by it) */
static VALUE worker_slot_set_serving(VALUE self, VALUE flag)
{
  __atomic_store_n(&worker_slot(self)->slot->serving, RTEST(flag) ? NW_SB_SERVING : 0, __ATOMIC_RELEASE);
  return flag;
}

/* WorkerSlot#stopping!: a graceful stop began; the worker takes no new
 * connection, so crowded siblings no longer share a crowd with it
 * (fewest_connections), but its listeners are still open */
static VALUE worker_slot_stopping(VALUE self)
{
  __atomic_store_n(&worker_slot(self)->slot->serving, NW_SB_STOPPING, __ATOMIC_RELEASE);
  return Qnil;
}

/* WorkerSlot#let_go!: a graceful stop let go of the worker's listeners
 * (it still serves what it took): siblings see it no longer listens */
static VALUE worker_slot_let_go(VALUE self)
{
  __atomic_store_n(&worker_slot(self)->slot->serving, NW_SB_LET_GO, __ATOMIC_RELEASE);
  return Qnil;
}

static VALUE worker_slot_accepting(VALUE self)
{
  return __atomic_load_n(&worker_slot(self)->slot->accepting, __ATOMIC_ACQUIRE) ? Qtrue : Qfalse;
}

static VALUE worker_slot_nr(VALUE self)
{
  return worker_slot(self)->nr;
}

/* WorkerSlot#thread(i) -> ThreadSlot */
static VALUE worker_slot_thread(VALUE self, VALUE vi)
{
  struct nw_worker_slot *s = worker_slot(self);
  return nw_thread_slot_new(s->board, nw_scoreboard_thread(s->board, s->nr, vi), s->slot);
}

void nw_init_scoreboard_slots(VALUE cScoreboard)
{
  cThreadSlot = rb_define_class_under(cScoreboard, "ThreadSlot", rb_cObject);
  rb_undef_alloc_func(cThreadSlot);
  rb_define_method(cThreadSlot, "request_started", thread_slot_started, -1);
  rb_define_method(cThreadSlot, "request_finished", thread_slot_finished, 0);
  rb_define_method(cThreadSlot, "responding!", thread_slot_responding, 0);
  rb_define_method(cThreadSlot, "bind_thread!", thread_slot_bind_thread, 0);
  rb_define_singleton_method(cThreadSlot, "responding!", thread_slot_s_responding, 0);
  id_thread_variable_set = rb_intern("thread_variable_set");
  sym_bound_slot = ID2SYM(rb_intern("narwhal_bound_thread_slot"));
  rb_define_method(cThreadSlot, "queue_time", thread_slot_queue_time, 2);
  rb_define_method(cThreadSlot, "busy_for", thread_slot_busy_for, 0);
  rb_define_method(cThreadSlot, "requests", thread_slot_requests, 0);

  cWorkerSlot = rb_define_class_under(cScoreboard, "WorkerSlot", rb_cObject);
  rb_undef_alloc_func(cWorkerSlot);
  rb_define_method(cWorkerSlot, "count", worker_slot_count, 1);
  rb_define_method(cWorkerSlot, "counter", worker_slot_counter, 1);
  rb_define_method(cWorkerSlot, "pid", worker_slot_pid, 0);
  rb_define_method(cWorkerSlot, "nr", worker_slot_nr, 0);
  rb_define_method(cWorkerSlot, "accepting=", worker_slot_set_accepting, 1);
  rb_define_method(cWorkerSlot, "accepting?", worker_slot_accepting, 0);
  rb_define_method(cWorkerSlot, "queued=", worker_slot_set_queued, 1);
  rb_define_method(cWorkerSlot, "connections=", worker_slot_set_connections, 1);
  rb_define_method(cWorkerSlot, "serving=", worker_slot_set_serving, 1);
  rb_define_method(cWorkerSlot, "stopping!", worker_slot_stopping, 0);
  rb_define_method(cWorkerSlot, "let_go!", worker_slot_let_go, 0);
  rb_define_method(cWorkerSlot, "thread", worker_slot_thread, 1);
}
