/*
 * The scoreboard's memory layout: one anonymous shared mapping made by the
 * master before it forks, read by the master and written by the workers.
 *
 *   header                     what follows, so a reader can check it;
 *                              worker_span, the slots in use so far
 *   worker slot 0 .. workers-1 (worker_bytes apart, from header_bytes)
 *     pid, accepting, queued, serving, counters[counters],
 *     histograms[histograms] (each: counts[buckets + 1], sum_us)
 *     thread sub-slot 0 .. threads-1 (thread_bytes apart, from threads_offset)
 *       started_us, requests, method_len, path_len, method, path
 *
 * Every part starts on its own cache line, so a thread's writes never
 * share a line with another thread's or another worker's.
 *
 * Who writes what: the master writes the header once and clears a worker
 * slot (reset) while no process uses it; a thread writes only its own
 * sub-slot, with atomic stores; counters and histograms are shared by a
 * worker's threads and only ever added to, with atomic adds. Readers use
 * atomic loads. A thread's method and path are plain bytes, written while
 * its started_us is 0 and published by the store that sets it: a reader
 * copies them between two loads of started_us and keeps the copy only when
 * both loads agree (nw_sb_current_request).
 *
 * This file knows nothing about Ruby: the layout can be read by any C code.
 * Change the layout, change NW_SB_VERSION.
 */
#ifndef NARWHAL_SCOREBOARD_H
#define NARWHAL_SCOREBOARD_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define NW_SB_MAGIC 0x4E575342u /* "NWSB" */
#define NW_SB_VERSION 6u

/* Upper bounds, so the mapping never has to grow after forking. */
#define NW_SB_MAX_WORKERS 4096
#define NW_SB_MAX_THREADS 256

/* Each part of the layout starts on a boundary of this many bytes. */
#define NW_SB_CACHE_LINE 64

/* A thread's current request as the master names it (timeout log line,
 * metrics, `narwhal status`): the first bytes of its method and path. */
#define NW_SB_METHOD_BYTES 16
#define NW_SB_PATH_BYTES 216

/* Histogram buckets: Prometheus's default upper bounds, in microseconds
 * (5 ms .. 10 s), then one bucket for everything above the last. */
#define NW_SB_BUCKETS 11
static inline int64_t nw_sb_bucket_us(int i)
{
  static const int64_t bounds[NW_SB_BUCKETS] = { 5000,   10000,   25000,   50000,   100000,  250000,
                                                 500000, 1000000, 2500000, 5000000, 10000000 };
  return bounds[i];
}

/* What a worker measures in histograms. */
enum nw_sb_histogram_kind {
  NW_SB_REQUEST_DURATION = 0, /* from the app's call to the response written */
  NW_SB_QUEUE_TIME_HEADER,    /* before the app started, from the proxy's X-Request-Start */
  NW_SB_QUEUE_TIME_KERNEL,    /* before the app started, from the kernel's arrival stamp */
  NW_SB_HISTOGRAMS            /* how many histograms there are */
};

/* What a worker counts; each is a monotonic count since the slot's reset. */
enum nw_sb_counter {
  NW_SB_CONNECTIONS_ACCEPTED = 0, /* connections the worker accepted */
  NW_SB_REQUESTS_REJECTED,        /* answered by the server itself (4xx, 408, 413...), not the app */
  NW_SB_APP_ERRORS,               /* 500s after the app raised */
  NW_SB_REQUEST_TIMEOUTS,         /* requests whose app code soft_timeout interrupted */
  NW_SB_REQUESTS_SHED_QUEUE,      /* answered 503 unstarted: they waited past queue_deadline */
  NW_SB_CONNECTIONS_HANDED_OFF,   /* idle kept-alive connections given to a sibling (keepalive_release) */
  NW_SB_COUNTERS                  /* how many counters there are */
};

struct nw_sb_header {
  uint32_t magic;          /* NW_SB_MAGIC */
  uint32_t version;        /* NW_SB_VERSION */
  uint32_t workers;        /* worker slots */
  uint32_t threads;        /* thread sub-slots per worker slot */
  uint32_t counters;       /* counters per worker slot */
  uint32_t header_bytes;   /* offset of worker slot 0 */
  uint32_t worker_bytes;   /* distance between worker slots */
  uint32_t threads_offset; /* offset of thread sub-slot 0 in a worker slot */
  uint32_t thread_bytes;   /* distance between thread sub-slots */
  uint32_t worker_span;    /* slots 0...worker_span may hold a worker; only
                              the master writes it, it only grows */
  uint32_t histograms;     /* histograms per worker slot */
  uint32_t buckets;        /* bounded buckets per histogram (one more above) */
  uint64_t total_bytes;    /* length of the whole mapping */
};

/* Observations per bucket (not cumulative: counts[i] holds the values in
 * (bound i-1, bound i], counts[NW_SB_BUCKETS] those above every bound) and
 * their sum; the count is the sum of counts. */
struct nw_sb_histogram {
  int64_t counts[NW_SB_BUCKETS + 1];
  int64_t sum_us;
};

#define NW_SB_SERVING 1
#define NW_SB_LET_GO 2
#define NW_SB_STOPPING 3

struct nw_sb_worker {
  int64_t pid;                       /* the process in the slot; 0 = none recorded */
  int64_t accepting;                 /* while the worker takes new connections: the
                                        threads it runs (fewer than the sub-slots
                                        after a reload lowered `threads`); else 0 */
  int64_t queued;                    /* requests read and waiting for a thread */
  int64_t connections;               /* connections the worker holds (its loop
                                        threads write it as they pass) */
  int64_t waiting;                   /* its threads blocked waiting for a report
                                        (its Poller writes it): idle, not just
                                        between two requests */
  int64_t serving;                   /* NW_SB_SERVING once the worker serves (booted),
                                        NW_SB_STOPPING once a graceful stop began (it
                                        takes no new connection, its listeners are
                                        open), NW_SB_LET_GO once it let go of them;
                                        0 before */
  int64_t counters[NW_SB_COUNTERS];  /* indexed by enum nw_sb_counter */
  struct nw_sb_histogram histograms[NW_SB_HISTOGRAMS]; /* by enum nw_sb_histogram_kind */
};

struct nw_sb_thread {
  int64_t started_us;  /* CLOCK_MONOTONIC us when the current request started; 0 = idle */
  int64_t requests;    /* requests this thread finished */
  int32_t tid;         /* the thread's kernel id (the master signals it for a backtrace); 0: none */
  int32_t fd;          /* the current request's connection (the master answers it at timeout); -1: none */
  int32_t responding;  /* 1 once the current request's response began: no other answer may go */
  int32_t backtraces;  /* backtraces the thread wrote when asked (BacktraceSignal) */
  uint32_t method_len; /* the current request's method and path lengths as */
  uint32_t path_len;   /* given: more than the bytes below when truncated */
  char method[NW_SB_METHOD_BYTES];
  char path[NW_SB_PATH_BYTES];
};

/* The clock of started_us: CLOCK_MONOTONIC in us, never 0 (which is idle). */
static inline int64_t nw_sb_now_us(void)
{
  struct timespec ts;
  int64_t us;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
  return us ? us : 1;
}

static inline size_t nw_sb_round_up(size_t bytes)
{
  return (bytes + NW_SB_CACHE_LINE - 1) / NW_SB_CACHE_LINE * NW_SB_CACHE_LINE;
}

/* Fills in the header for this many workers and threads (in range). */
static inline void nw_sb_layout(struct nw_sb_header *h, uint32_t workers, uint32_t threads)
{
  h->magic = NW_SB_MAGIC;
  h->version = NW_SB_VERSION;
  h->workers = workers;
  h->threads = threads;
  h->counters = NW_SB_COUNTERS;
  h->header_bytes = (uint32_t)nw_sb_round_up(sizeof(struct nw_sb_header));
  h->threads_offset = (uint32_t)nw_sb_round_up(sizeof(struct nw_sb_worker));
  h->thread_bytes = (uint32_t)nw_sb_round_up(sizeof(struct nw_sb_thread));
  h->worker_bytes = h->threads_offset + threads * h->thread_bytes;
  h->worker_span = 0;
  h->histograms = NW_SB_HISTOGRAMS;
  h->buckets = NW_SB_BUCKETS;
  h->total_bytes = (uint64_t)h->header_bytes + (uint64_t)workers * h->worker_bytes;
}

/* Worker slot nr (< h->workers) of the mapping at base, laid out as h says. */
static inline struct nw_sb_worker *nw_sb_worker_at(char *base, const struct nw_sb_header *h,
                                                   uint32_t nr)
{
  return (struct nw_sb_worker *)(base + h->header_bytes + (size_t)nr * h->worker_bytes);
}

/* Thread sub-slot i (< h->threads) of worker slot w. */
static inline struct nw_sb_thread *nw_sb_thread_at(struct nw_sb_worker *w,
                                                   const struct nw_sb_header *h, uint32_t i)
{
  return (struct nw_sb_thread *)((char *)w + h->threads_offset + (size_t)i * h->thread_bytes);
}

/* One observation of us microseconds (negative ones count as 0). */
static inline void nw_sb_observe(struct nw_sb_histogram *h, int64_t us)
{
  int i = 0;
  if (us < 0) us = 0;
  while (i < NW_SB_BUCKETS && us > nw_sb_bucket_us(i)) i++;
  __atomic_add_fetch(&h->counts[i], 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&h->sum_us, us, __ATOMIC_RELAXED);
}

/* Copies up to cap bytes of src; the length given is kept whole. */
static inline void nw_sb_set_text(char *dst, size_t cap, uint32_t *len, const char *src, size_t n)
{
  *len = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
  memcpy(dst, src, n < cap ? n : cap);
}

/* A thread begins a request (method and path: its first bytes are kept,
 * NULL for none; fd: its connection, -1 unknown): the master's `timeout`
 * clock starts. The rest is written while started_us is still 0, then
 * published with it. */
static inline void nw_sb_request_started(struct nw_sb_thread *t, const char *method, size_t method_len,
                                         const char *path, size_t path_len, int fd)
{
  __atomic_thread_fence(__ATOMIC_RELEASE); /* the 0 of the last finish comes first */
  nw_sb_set_text(t->method, NW_SB_METHOD_BYTES, &t->method_len, method, method ? method_len : 0);
  nw_sb_set_text(t->path, NW_SB_PATH_BYTES, &t->path_len, path, path ? path_len : 0);
  __atomic_store_n(&t->fd, fd, __ATOMIC_RELAXED);
  __atomic_store_n(&t->responding, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&t->started_us, nw_sb_now_us(), __ATOMIC_RELEASE);
}

/* The current request's response begins: from now on only its own bytes
 * may go to the connection (the master no longer answers it at timeout).
 * Stored before the first byte is written. */
static inline void nw_sb_responding(struct nw_sb_thread *t)
{
  __atomic_store_n(&t->responding, 1, __ATOMIC_RELEASE);
}

/* The thread is idle again, one request more; its duration goes into the
 * worker's histogram. Only this thread writes requests, so a load and a
 * store do: no locked add for it on the request path. */
static inline void nw_sb_request_finished(struct nw_sb_thread *t, struct nw_sb_worker *w)
{
  int64_t started = __atomic_load_n(&t->started_us, __ATOMIC_RELAXED);
  if (started && w) nw_sb_observe(&w->histograms[NW_SB_REQUEST_DURATION], nw_sb_now_us() - started);
  __atomic_store_n(&t->started_us, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&t->requests, __atomic_load_n(&t->requests, __ATOMIC_RELAXED) + 1,
                   __ATOMIC_RELAXED);
}

/* When the thread's current request started, or 0 while it is idle. */
static inline int64_t nw_sb_started_us(const struct nw_sb_thread *t)
{
  return __atomic_load_n(&t->started_us, __ATOMIC_ACQUIRE);
}

/* The thread's current request: its start (0 when idle) and a copy of its
 * method and path (NW_SB_METHOD_BYTES and NW_SB_PATH_BYTES big) with their
 * lengths as given. A request that changes during the copy is read again;
 * 0 when it keeps changing. */
static inline int64_t nw_sb_current_request(const struct nw_sb_thread *t, char *method,
                                            uint32_t *method_len, char *path, uint32_t *path_len)
{
  int tries;
  for (tries = 0; tries < 4; tries++) {
    int64_t started = nw_sb_started_us(t);
    if (!started) return 0;
    *method_len = t->method_len;
    *path_len = t->path_len;
    memcpy(method, t->method, NW_SB_METHOD_BYTES);
    memcpy(path, t->path, NW_SB_PATH_BYTES);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&t->started_us, __ATOMIC_RELAXED) == started) return started;
  }
  return 0;
}

static inline int64_t nw_sb_requests(const struct nw_sb_thread *t)
{
  return __atomic_load_n(&t->requests, __ATOMIC_RELAXED);
}

/* Which siblings a walk over the slots visits. */
enum nw_sb_siblings {
  NW_SB_ACCEPTING, /* listeners in its epoll set: it takes new connections now */
  NW_SB_SERVING_ONES /* booted and not stopping, accepting at the moment or not */
};

/* The next worker from *nr on, other than skip, of the kind asked, or
 * NULL; *nr is then past it. */
static inline struct nw_sb_worker *nw_sb_next_sibling(char *base, const struct nw_sb_header *h, uint32_t skip,
                                                      uint32_t *nr, enum nw_sb_siblings which)
{
  uint32_t span = __atomic_load_n(&((const struct nw_sb_header *)base)->worker_span, __ATOMIC_ACQUIRE);
  struct nw_sb_worker *w;
  int ok;

  if (span > h->workers) span = h->workers;
  while (*nr < span) {
    w = nw_sb_worker_at(base, h, (*nr)++);
    if (*nr - 1 == skip) continue;
    ok = which == NW_SB_ACCEPTING ? __atomic_load_n(&w->accepting, __ATOMIC_ACQUIRE) > 0
                                  : __atomic_load_n(&w->serving, __ATOMIC_ACQUIRE) == NW_SB_SERVING;
    if (ok) return w;
  }
  return NULL;
}

/*
 * The most free threads any accepting worker other than skip has: its idle
 * threads less the requests it has waiting for one (negative when it has a
 * backlog), or NW_SB_NONE when no other worker accepts. A worker prefers
 * to leave a new connection to a sibling with more. Busy is what the
 * threads' sub-slots say: a request a sibling has read but not yet started
 * is not seen, which only makes the sibling look freer for an instant.
 */
#define NW_SB_NONE INT64_MIN

static inline int64_t nw_sb_most_free(char *base, const struct nw_sb_header *h, uint32_t skip)
{
  int64_t best = NW_SB_NONE, threads, free_threads;
  struct nw_sb_worker *w;
  uint32_t nr = 0, i;

  while ((w = nw_sb_next_sibling(base, h, skip, &nr, NW_SB_ACCEPTING))) {
    threads = __atomic_load_n(&w->accepting, __ATOMIC_ACQUIRE);
    if (threads > (int64_t)h->threads) threads = h->threads;
    free_threads = 0;
    /* sub-slots past the worker's threads are never busy: not idle threads */
    for (i = 0; i < (uint32_t)threads; i++)
      if (!nw_sb_started_us(nw_sb_thread_at(w, h, i))) free_threads++;
    free_threads -= __atomic_load_n(&w->queued, __ATOMIC_ACQUIRE);
    if (free_threads > best) best = free_threads;
  }
  return best;
}

/* The most threads blocked waiting for a report that an accepting worker
 * other than skip has (0 when none accepts): idle, not just between two
 * requests. */
static inline int64_t nw_sb_most_waiting(char *base, const struct nw_sb_header *h, uint32_t skip)
{
  int64_t most = 0, waiting;
  struct nw_sb_worker *w;
  uint32_t nr = 0;

  while ((w = nw_sb_next_sibling(base, h, skip, &nr, NW_SB_ACCEPTING)))
    if ((waiting = __atomic_load_n(&w->waiting, __ATOMIC_ACQUIRE)) > most) most = waiting;
  return most;
}

/* The fewest connections any serving worker other than skip holds (one
 * whose listeners are out of its set a moment, claims for instance, counts
 * too), or NW_SB_NONE when no other worker serves. */
static inline int64_t nw_sb_fewest_connections(char *base, const struct nw_sb_header *h, uint32_t skip)
{
  int64_t fewest = NW_SB_NONE, held;
  struct nw_sb_worker *w;
  uint32_t nr = 0;

  while ((w = nw_sb_next_sibling(base, h, skip, &nr, NW_SB_SERVING_ONES))) {
    held = __atomic_load_n(&w->connections, __ATOMIC_ACQUIRE);
    if (fewest == NW_SB_NONE || held < fewest) fewest = held;
  }
  return fewest;
}

/* Counters are shared by a worker's threads: an atomic add. */
static inline void nw_sb_count(struct nw_sb_worker *w, enum nw_sb_counter c)
{
  __atomic_add_fetch(&w->counters[c], 1, __ATOMIC_RELAXED);
}

#endif
