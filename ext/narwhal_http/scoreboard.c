/*
 * Narwhal::Scoreboard: the handle on the shared mapping laid out in
 * scoreboard.h. The master maps it before forking and reads it (a worker
 * stuck past `timeout`, requests served, counters); workers write to it
 * through the ThreadSlot and WorkerSlot objects of scoreboard_slots.c.
 * A request costs a few memory writes and atomic adds and two reads of the
 * vDSO clock: no signals, no pipes, no system calls on the request path. lib/narwhal/scoreboard.rb adds the Ruby side.
 */
#include "narwhal_http.h"
#include "scoreboard.h"
#include <string.h>
#include <sys/mman.h>

struct nw_scoreboard {
  char *base;                 /* the mapping; NULL until initialized */
  struct nw_sb_header layout; /* a private copy: what a worker writes can
                                 never move the master's reads */
};

/* Each counter as Ruby sees it: a constant (its index) and a name. */
static const struct {
  const char *constant;
  const char *name;
} counters[NW_SB_COUNTERS] = {
  [NW_SB_CONNECTIONS_ACCEPTED] = { "CONNECTIONS_ACCEPTED", "connections_accepted" },
  [NW_SB_REQUESTS_REJECTED] = { "REQUESTS_REJECTED", "requests_rejected" },
  [NW_SB_APP_ERRORS] = { "APP_ERRORS", "app_errors" },
  [NW_SB_REQUEST_TIMEOUTS] = { "REQUEST_TIMEOUTS", "request_timeouts" },
  [NW_SB_REQUESTS_SHED_QUEUE] = { "REQUESTS_SHED_QUEUE", "requests_shed_queue" },
  [NW_SB_CONNECTIONS_HANDED_OFF] = { "CONNECTIONS_HANDED_OFF", "connections_handed_off" },
};

static void board_free(void *ptr)
{
  struct nw_scoreboard *b = ptr;
  if (b->base) munmap(b->base, (size_t)b->layout.total_bytes);
  xfree(b);
}

static size_t board_memsize(const void *ptr)
{
  return sizeof(struct nw_scoreboard);
}

static const rb_data_type_t board_type = {
  "Narwhal::Scoreboard",
  { NULL, board_free, board_memsize, NULL, {0} },
  NULL, NULL, RUBY_TYPED_FREE_IMMEDIATELY
};

static VALUE board_alloc(VALUE klass)
{
  struct nw_scoreboard *b;
  VALUE obj = TypedData_Make_Struct(klass, struct nw_scoreboard, &board_type, b);
  b->base = NULL;
  memset(&b->layout, 0, sizeof(b->layout));
  return obj;
}

static struct nw_scoreboard *get_board(VALUE self)
{
  struct nw_scoreboard *b;
  TypedData_Get_Struct(self, struct nw_scoreboard, &board_type, b);
  return b;
}

/* #map_shared(workers, threads), private: Scoreboard.new's work */
static VALUE board_map_shared(VALUE self, VALUE vworkers, VALUE vthreads)
{
  struct nw_scoreboard *b = get_board(self);
  long workers = NUM2LONG(vworkers), threads = NUM2LONG(vthreads);
  void *mem;

  if (b->base) rb_raise(rb_eRuntimeError, "scoreboard already mapped");
  if (workers < 1 || workers > NW_SB_MAX_WORKERS)
    rb_raise(rb_eArgError, "scoreboard slots must be 1..%d", NW_SB_MAX_WORKERS);
  if (threads < 1 || threads > NW_SB_MAX_THREADS)
    rb_raise(rb_eArgError, "scoreboard threads must be 1..%d", NW_SB_MAX_THREADS);
  nw_sb_layout(&b->layout, (uint32_t)workers, (uint32_t)threads);
  mem = mmap(NULL, (size_t)b->layout.total_bytes, PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    memset(&b->layout, 0, sizeof(b->layout));
    rb_sys_fail("mmap");
  }
  /* written once, before any worker exists; the mapping starts zeroed */
  memcpy(mem, &b->layout, sizeof(b->layout));
  b->base = mem;
  return self;
}

static struct nw_sb_worker *worker_of(struct nw_scoreboard *b, VALUE vnr)
{
  long nr = NUM2LONG(vnr);
  if (nr < 0 || nr >= (long)b->layout.workers) rb_raise(rb_eIndexError, "no scoreboard slot %ld", nr);
  return nw_sb_worker_at(b->base, &b->layout, (uint32_t)nr);
}

static struct nw_sb_thread *thread_of(struct nw_scoreboard *b, VALUE vnr, VALUE vi)
{
  struct nw_sb_worker *w = worker_of(b, vnr);
  long i = NUM2LONG(vi);
  if (i < 0 || i >= (long)b->layout.threads)
    rb_raise(rb_eIndexError, "no thread %ld in scoreboard slot %ld (threads per slot: %u)", i,
             NUM2LONG(vnr), b->layout.threads);
  return nw_sb_thread_at(w, &b->layout, (uint32_t)i);
}

struct nw_sb_worker *nw_scoreboard_worker(VALUE board, VALUE nr)
{
  return worker_of(get_board(board), nr);
}

struct nw_sb_thread *nw_scoreboard_thread(VALUE board, VALUE nr, VALUE i)
{
  return thread_of(get_board(board), nr, i);
}

/* The mapping and (*layout) its layout, for readers of every slot
 * (load_report.c); raises TypeError for another object. */
char *nw_scoreboard_base(VALUE board, const struct nw_sb_header **layout)
{
  struct nw_scoreboard *b = get_board(board);
  if (!b->base) rb_raise(rb_eRuntimeError, "scoreboard not mapped");
  *layout = &b->layout;
  return b->base;
}

static VALUE board_size(VALUE self)
{
  return UINT2NUM(get_board(self)->layout.workers);
}

static VALUE board_threads(VALUE self)
{
  return UINT2NUM(get_board(self)->layout.threads);
}

/* #header -> Hash: the header as it is in the shared mapping */
static VALUE board_header(VALUE self)
{
  struct nw_scoreboard *b = get_board(self);
  const struct nw_sb_header *h = (const struct nw_sb_header *)b->base;
  VALUE hash;

  if (!h) rb_raise(rb_eRuntimeError, "scoreboard not mapped");
  hash = rb_hash_new();
#define NW_SB_FIELD(name, conv) rb_hash_aset(hash, ID2SYM(rb_intern(#name)), conv(h->name))
  NW_SB_FIELD(magic, UINT2NUM);
  NW_SB_FIELD(version, UINT2NUM);
  NW_SB_FIELD(workers, UINT2NUM);
  NW_SB_FIELD(threads, UINT2NUM);
  NW_SB_FIELD(counters, UINT2NUM);
  NW_SB_FIELD(header_bytes, UINT2NUM);
  NW_SB_FIELD(worker_bytes, UINT2NUM);
  NW_SB_FIELD(threads_offset, UINT2NUM);
  NW_SB_FIELD(thread_bytes, UINT2NUM);
  NW_SB_FIELD(worker_span, UINT2NUM);
  NW_SB_FIELD(histograms, UINT2NUM);
  NW_SB_FIELD(buckets, UINT2NUM);
  NW_SB_FIELD(total_bytes, ULL2NUM);
#undef NW_SB_FIELD
  return hash;
}

/* #busy_for(nr) -> Float seconds on the longest current request among the
 * worker's threads, or nil when all are idle */
static VALUE board_busy_for(VALUE self, VALUE vnr)
{
  struct nw_scoreboard *b = get_board(self);
  struct nw_sb_worker *w = worker_of(b, vnr);
  int64_t oldest = 0;
  uint32_t i;

  for (i = 0; i < b->layout.threads; i++) {
    int64_t started = nw_sb_started_us(nw_sb_thread_at(w, &b->layout, i));
    if (started && (!oldest || started < oldest)) oldest = started;
  }
  if (!oldest) return Qnil;
  return DBL2NUM((double)(nw_sb_now_us() - oldest) / 1e6);
}

/* #current_request(nr, i) -> [seconds, method, path, path_length, fd,
 * responding, tid] for the request thread i of worker nr is on, nil while
 * it is idle. method and path are binary Strings of at most METHOD_BYTES
 * and PATH_BYTES; the path's length as given is larger when it was
 * truncated. fd: its connection's descriptor in the worker (-1 unknown);
 * responding: its response began; tid: the thread's kernel id (0 unknown);
 * backtraces: how many it wrote when asked (BacktraceSignal). */
static VALUE board_current_request(VALUE self, VALUE vnr, VALUE vi)
{
  struct nw_sb_thread *t = thread_of(get_board(self), vnr, vi);
  char method[NW_SB_METHOD_BYTES], path[NW_SB_PATH_BYTES];
  uint32_t method_len = 0, path_len = 0;
  int64_t started = nw_sb_current_request(t, method, &method_len, path, &path_len);

  if (!started) return Qnil;
  return rb_ary_new_from_args(8, DBL2NUM((double)(nw_sb_now_us() - started) / 1e6),
                              rb_str_new(method, method_len < NW_SB_METHOD_BYTES ? method_len : NW_SB_METHOD_BYTES),
                              rb_str_new(path, path_len < NW_SB_PATH_BYTES ? path_len : NW_SB_PATH_BYTES),
                              UINT2NUM(path_len), INT2FIX(__atomic_load_n(&t->fd, __ATOMIC_RELAXED)),
                              __atomic_load_n(&t->responding, __ATOMIC_ACQUIRE) ? Qtrue : Qfalse,
                              INT2FIX(__atomic_load_n(&t->tid, __ATOMIC_ACQUIRE)),
                              INT2FIX(__atomic_load_n(&t->backtraces, __ATOMIC_ACQUIRE)));
}

/* #backtraces(nr, i) -> Integer: backtraces thread i of worker nr wrote
 * when asked (BacktraceSignal); the master waits for one more */
static VALUE board_backtraces(VALUE self, VALUE vnr, VALUE vi)
{
  return INT2FIX(__atomic_load_n(&thread_of(get_board(self), vnr, vi)->backtraces, __ATOMIC_ACQUIRE));
}

/* #histogram(nr, kind) -> [[count per bucket, not cumulative; the last is
 * above every bound], sum in seconds] for REQUEST_DURATION, QUEUE_TIME_HEADER
 * or QUEUE_TIME_KERNEL */
static VALUE board_histogram(VALUE self, VALUE vnr, VALUE vkind)
{
  struct nw_sb_worker *w = worker_of(get_board(self), vnr);
  long kind = NUM2LONG(vkind);
  const struct nw_sb_histogram *h;
  VALUE counts = rb_ary_new_capa(NW_SB_BUCKETS + 1);
  int i;

  if (kind < 0 || kind >= NW_SB_HISTOGRAMS) rb_raise(rb_eIndexError, "no scoreboard histogram %ld", kind);
  h = &w->histograms[kind];
  for (i = 0; i <= NW_SB_BUCKETS; i++) rb_ary_push(counts, LL2NUM(__atomic_load_n(&h->counts[i], __ATOMIC_RELAXED)));
  return rb_assoc_new(counts, DBL2NUM((double)__atomic_load_n(&h->sum_us, __ATOMIC_RELAXED) / 1e6));
}

/* #serving?(nr): the worker in slot nr finished booting and serves */
static VALUE board_serving(VALUE self, VALUE vnr)
{
  return __atomic_load_n(&worker_of(get_board(self), vnr)->serving, __ATOMIC_ACQUIRE) ? Qtrue : Qfalse;
}

/* #requests(nr) -> Integer: requests finished by all the worker's threads */
static VALUE board_requests(VALUE self, VALUE vnr)
{
  struct nw_scoreboard *b = get_board(self);
  struct nw_sb_worker *w = worker_of(b, vnr);
  int64_t sum = 0;
  uint32_t i;

  for (i = 0; i < b->layout.threads; i++) sum += nw_sb_requests(nw_sb_thread_at(w, &b->layout, i));
  return LL2NUM(sum);
}

/* #reset(nr, pid = 0): a new process takes the slot (or none does). Only
 * while no process writes to it: counters and thread sub-slots start at 0. */
static VALUE board_reset(int argc, VALUE *argv, VALUE self)
{
  struct nw_scoreboard *b = get_board(self);
  VALUE vnr, vpid;
  struct nw_sb_worker *w;
  int64_t pid;
  uint32_t i;

  rb_scan_args(argc, argv, "11", &vnr, &vpid);
  w = worker_of(b, vnr);
  pid = NIL_P(vpid) ? 0 : NUM2LL(vpid);
  for (i = 0; i < b->layout.threads; i++) {
    struct nw_sb_thread *t = nw_sb_thread_at(w, &b->layout, i);
    __atomic_store_n(&t->started_us, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&t->requests, 0, __ATOMIC_RELEASE);
  }
  for (i = 0; i < NW_SB_COUNTERS; i++) __atomic_store_n(&w->counters[i], 0, __ATOMIC_RELEASE);
  memset(w->histograms, 0, sizeof(w->histograms));
  __atomic_store_n(&w->serving, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&w->accepting, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&w->queued, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&w->connections, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&w->waiting, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&w->pid, pid, __ATOMIC_RELEASE);
  return Qnil;
}

/* #span = n: slots 0...n may hold workers from now on (the master, before
 * it forks into a slot; it never shrinks, so a reader never misses one) */
static VALUE board_set_span(VALUE self, VALUE vspan)
{
  struct nw_scoreboard *b = get_board(self);
  struct nw_sb_header *h = (struct nw_sb_header *)b->base;
  long span = NUM2LONG(vspan);

  if (span < 0 || span > (long)b->layout.workers) rb_raise(rb_eIndexError, "no scoreboard slot %ld", span - 1);
  if ((uint32_t)span > __atomic_load_n(&h->worker_span, __ATOMIC_ACQUIRE))
    __atomic_store_n(&h->worker_span, (uint32_t)span, __ATOMIC_RELEASE);
  return vspan;
}

/* What a fold over the accepting siblings of worker nr gives; nil for
 * NW_SB_NONE (none accepts). */
static VALUE of_siblings(VALUE self, VALUE vnr,
                         int64_t (*fold)(char *base, const struct nw_sb_header *h, uint32_t skip))
{
  struct nw_scoreboard *b = get_board(self);
  int64_t value;
  worker_of(b, vnr);
  value = fold(b->base, &b->layout, (uint32_t)NUM2LONG(vnr));
  return value == NW_SB_NONE ? Qnil : LL2NUM(value);
}

/* #most_free_threads(nr) -> Integer or nil: the most free threads (idle
 * less queued requests; negative for a backlog) an accepting worker other
 * than nr has, nil when no other worker accepts */
static VALUE board_most_free_threads(VALUE self, VALUE vnr)
{
  return of_siblings(self, vnr, nw_sb_most_free);
}

/* #fewest_connections(nr) -> Integer or nil: the fewest connections a
 * serving worker other than nr holds, nil when no other worker serves */
static VALUE board_fewest_connections(VALUE self, VALUE vnr)
{
  return of_siblings(self, vnr, nw_sb_fewest_connections);
}

/* #most_waiting_threads(nr) -> Integer: the most threads an accepting
 * worker other than nr has blocked waiting for a report (idle) */
static VALUE board_most_waiting_threads(VALUE self, VALUE vnr)
{
  return of_siblings(self, vnr, nw_sb_most_waiting);
}

/* #siblings_listening?(nr): a worker other than nr serves and has not let
 * go of its listeners (a reconnect may still land in a queue it holds),
 * also once its graceful stop began */
static VALUE board_siblings_listening(VALUE self, VALUE vnr)
{
  struct nw_scoreboard *b = get_board(self);
  const struct nw_sb_header *h = (const struct nw_sb_header *)b->base;
  uint32_t span = __atomic_load_n(&h->worker_span, __ATOMIC_ACQUIRE), nr, skip;
  worker_of(b, vnr);
  skip = (uint32_t)NUM2LONG(vnr);
  if (span > b->layout.workers) span = b->layout.workers;
  for (nr = 0; nr < span; nr++) {
    struct nw_sb_worker *w = nw_sb_worker_at(b->base, &b->layout, nr);
    if (nr == skip || !__atomic_load_n(&w->pid, __ATOMIC_ACQUIRE)) continue;
    int64_t serving = __atomic_load_n(&w->serving, __ATOMIC_ACQUIRE);
    if (serving == NW_SB_SERVING || serving == NW_SB_STOPPING) return Qtrue;
  }
  return Qfalse;
}

/* #idle_threads(nr, threads) -> Integer: of worker nr's first threads
 * sub-slots, those not on a request */
static VALUE board_idle_threads(VALUE self, VALUE vnr, VALUE vthreads)
{
  struct nw_scoreboard *b = get_board(self);
  struct nw_sb_worker *w = worker_of(b, vnr);
  long threads = NUM2LONG(vthreads), i, idle = 0;
  if (threads < 0 || threads > (long)b->layout.threads) rb_raise(rb_eIndexError, "no %ld threads", threads);
  for (i = 0; i < threads; i++)
    if (!nw_sb_started_us(nw_sb_thread_at(w, &b->layout, (uint32_t)i))) idle++;
  return LONG2NUM(idle);
}

/* #thread_slot(nr, i = 0) -> ThreadSlot */
static VALUE board_thread_slot(int argc, VALUE *argv, VALUE self)
{
  VALUE vnr, vi;
  rb_scan_args(argc, argv, "11", &vnr, &vi);
  struct nw_scoreboard *b = get_board(self);
  return nw_thread_slot_new(self, thread_of(b, vnr, NIL_P(vi) ? INT2FIX(0) : vi), worker_of(b, vnr));
}

/* #worker_slot(nr) -> WorkerSlot */
static VALUE board_worker_slot(VALUE self, VALUE vnr)
{
  worker_of(get_board(self), vnr); /* IndexError now, not later */
  return nw_worker_slot_new(self, vnr);
}

/* Scoreboard::CONNECTIONS_ACCEPTED... and COUNTERS, their names in index order */
static void define_counters(VALUE c)
{
  VALUE names = rb_ary_new_capa(NW_SB_COUNTERS);
  int i;

  for (i = 0; i < NW_SB_COUNTERS; i++) {
    rb_define_const(c, counters[i].constant, INT2FIX(i));
    rb_ary_push(names, ID2SYM(rb_intern(counters[i].name)));
  }
  rb_define_const(c, "COUNTERS", rb_ary_freeze(names));
}

/* Scoreboard::REQUEST_DURATION, QUEUE_TIME_HEADER, QUEUE_TIME_KERNEL and
 * HISTOGRAM_BOUNDS (seconds) */
static void define_histograms(VALUE c)
{
  VALUE bounds = rb_ary_new_capa(NW_SB_BUCKETS);
  int i;

  rb_define_const(c, "REQUEST_DURATION", INT2FIX(NW_SB_REQUEST_DURATION));
  rb_define_const(c, "QUEUE_TIME_HEADER", INT2FIX(NW_SB_QUEUE_TIME_HEADER));
  rb_define_const(c, "QUEUE_TIME_KERNEL", INT2FIX(NW_SB_QUEUE_TIME_KERNEL));
  for (i = 0; i < NW_SB_BUCKETS; i++) rb_ary_push(bounds, DBL2NUM((double)nw_sb_bucket_us(i) / 1e6));
  rb_define_const(c, "HISTOGRAM_BOUNDS", rb_ary_freeze(bounds));
}

void nw_init_scoreboard(void)
{
  VALUE c = rb_define_class_under(nw_mNarwhal, "Scoreboard", rb_cObject);
  rb_define_const(c, "MAX_SLOTS", INT2NUM(NW_SB_MAX_WORKERS));
  rb_define_const(c, "MAX_THREADS", INT2NUM(NW_SB_MAX_THREADS));
  rb_define_const(c, "MAGIC", UINT2NUM(NW_SB_MAGIC));
  rb_define_const(c, "LAYOUT_VERSION", UINT2NUM(NW_SB_VERSION));
  rb_define_const(c, "METHOD_BYTES", INT2NUM(NW_SB_METHOD_BYTES));
  rb_define_const(c, "PATH_BYTES", INT2NUM(NW_SB_PATH_BYTES));
  define_counters(c);
  define_histograms(c);
  rb_define_alloc_func(c, board_alloc);
  rb_define_private_method(c, "map_shared", board_map_shared, 2);
  rb_define_method(c, "size", board_size, 0);
  rb_define_method(c, "threads", board_threads, 0);
  rb_define_method(c, "header", board_header, 0);
  rb_define_method(c, "busy_for", board_busy_for, 1);
  rb_define_method(c, "requests", board_requests, 1);
  rb_define_method(c, "current_request", board_current_request, 2);
  rb_define_method(c, "histogram", board_histogram, 2);
  rb_define_method(c, "backtraces", board_backtraces, 2);
  rb_define_method(c, "serving?", board_serving, 1);
  rb_define_method(c, "reset", board_reset, -1);
  rb_define_method(c, "span=", board_set_span, 1);
  rb_define_method(c, "most_free_threads", board_most_free_threads, 1);
  rb_define_method(c, "fewest_connections", board_fewest_connections, 1);
  rb_define_method(c, "most_waiting_threads", board_most_waiting_threads, 1);
  rb_define_method(c, "idle_threads", board_idle_threads, 2);
  rb_define_method(c, "siblings_listening?", board_siblings_listening, 1);
  rb_define_method(c, "thread_slot", board_thread_slot, -1);
  rb_define_method(c, "worker_slot", board_worker_slot, 1);
  nw_init_scoreboard_slots(c);
}
