/*
 * Narwhal::LoadReport: the value of the `endpoint-load-metrics` response
 * header (orca_load_report), the load report in ORCA's text form that
 * Envoy reads from each response (its client-side weighted round robin
 * weighs an endpoint by rps_fractional / application_utilization):
 *
 *   endpoint-load-metrics: TEXT application_utilization=0.421, rps_fractional=118.52, named_metrics.queue=3
 *
 * The instance's load, not one worker's: every worker of the master, read
 * from the scoreboard, and the kernel's listen queues.
 *
 * - application_utilization: the share of the request threads' time spent
 *   on requests. Each sample takes the busy time gained since the last (the
 *   workers' REQUEST_DURATION sums, plus the age of each request in flight)
 *   over the threads of the workers that are up times the time between; the
 *   figure is that, averaged over about SMOOTHING_US (an exponential moving
 *   average). 0 to 1.
 * - rps_fractional: requests finished per second, averaged the same way.
 * - named_metrics.queue: at the sample, connections in the listen queues
 *   of the TCP listeners (accepted by no worker yet) and connections the
 *   workers accepted that wait for a thread (their `queued`).
 *
 * A sample reads the scoreboard (a load per thread sub-slot) and makes one
 * getsockopt per TCP listener; it is taken at most every REFRESH_US, by the
 * first response after that (the GVL makes that one thread at a time).
 * Between samples ResponseHead copies the line as it is: no object and no
 * system call per response. The numbers are written as integers (no
 * locale, no exponent).
 */
#include "narwhal_http.h"
#include "scoreboard.h"
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#define REFRESH_US 100000    /* a sample at most this often */
#define SMOOTHING_US 1000000 /* the averages' time constant */
#define MAX_LISTENERS 64     /* listeners whose queue is counted */
#define HEADER_NAME "endpoint-load-metrics"
#define LINE_MAX_BYTES 192

/* What the last sample read of one worker slot. */
struct lr_slot {
  int64_t pid;      /* whose the counts were: another pid's start from 0 */
  int64_t busy_us;  /* its REQUEST_DURATION sum plus its requests' ages */
  int64_t requests; /* requests its threads finished */
};

/* What one sample adds up over the worker slots. */
struct lr_sample {
  int64_t busy_us, requests; /* gained since the last sample */
  int64_t threads;           /* of the workers that are up */
  int64_t in_flight;         /* their requests now */
  int64_t queue;             /* waiting connections now */
};

typedef struct {
  VALUE board;            /* the Scoreboard */
  uint32_t own;           /* this worker's slot: up, whatever the slot says */
  int64_t threads;        /* request threads of a worker */
  struct lr_slot *slots;  /* per worker slot, the last sample's reading */
  uint32_t nslots;
  int fds[MAX_LISTENERS]; /* TCP listeners */
  int nfds;
  int64_t sampled_us;     /* the last sample (CLOCK_MONOTONIC us); 0: none yet */
  double utilization, rps;
  int64_t queue;
  char line[LINE_MAX_BYTES]; /* "endpoint-load-metrics: TEXT ...\r\n" */
  long line_len;
} load_report;

static VALUE cLoadReport;

static void report_mark(void *ptr) { rb_gc_mark(((load_report *)ptr)->board); }

static void report_free(void *ptr)
{
  load_report *r = ptr;
  xfree(r->slots);
  xfree(r);
}

static size_t report_size(const void *ptr)
{
  const load_report *r = ptr;
  return sizeof(*r) + r->nslots * sizeof(struct lr_slot);
}

static const rb_data_type_t report_type = {
  "Narwhal::LoadReport",
  { report_mark, report_free, report_size, NULL, {0} },
  0, 0, RUBY_TYPED_FREE_IMMEDIATELY
};

static load_report *get_report(VALUE self) { return rb_check_typeddata(self, &report_type); }

static VALUE report_alloc(VALUE klass)
{
  load_report *r;
  VALUE obj = TypedData_Make_Struct(klass, load_report, &report_type, r);
  r->board = Qnil;
  return obj;
}

static double clamp01(double x) { return x >= 0 ? (x <= 1 ? x : 1) : 0; /* NaN: 0 */ }

/* The header's value for these numbers into buf: utilization to 1e-6 (a
 * balancer divides by it: a light load needs its digits), requests per
 * second to 0.001. */
static int format_value(char *buf, size_t cap, double utilization, double rps, int64_t queue)
{
  long micro = lround(clamp01(utilization) * 1e6);
  long long milli = llround((rps >= 0 ? (rps < 1e12 ? rps : 1e12) : 0) * 1e3); /* NaN: 0 */
  return snprintf(buf, cap, "TEXT application_utilization=%ld.%06ld, rps_fractional=%lld.%03lld, named_metrics.queue=%lld",
                  micro / 1000000, micro % 1000000, milli / 1000, milli % 1000, (long long)(queue > 0 ? queue : 0));
}

static void make_line(load_report *r)
{
  static const char name[] = HEADER_NAME ": ";
  size_t n = sizeof(name) - 1;
  int len;
  memcpy(r->line, name, n);
  len = format_value(r->line + n, sizeof(r->line) - n - 2, r->utilization, r->rps, r->queue);
  /* the largest numbers fit (137 bytes); were one not to, the line is cut */
  if (len > 0) n += (size_t)len < sizeof(r->line) - n - 2 ? (size_t)len : sizeof(r->line) - n - 3;
  memcpy(r->line + n, "\r\n", 2);
  r->line_len = (long)(n + 2);
}

/* Connections waiting in the TCP listeners' accept queues. */
static int64_t listen_queue(const load_report *r)
{
  struct tcp_info info;
  socklen_t len;
  int64_t sum = 0;
  int i;
  for (i = 0; i < r->nfds; i++) {
    len = sizeof(info);
    /* a descriptor closed and reused since is no listener: skipped */
    if (getsockopt(r->fds[i], IPPROTO_TCP, TCP_INFO, &info, &len) == 0 && info.tcpi_state == TCP_LISTEN)
      sum += info.tcpi_unacked;
  }
  return sum;
}

/* Worker slot nr at now into s; its reading replaces the last one. */
static void sample_slot(load_report *r, char *base, const struct nw_sb_header *h, uint32_t nr, int64_t now,
                        struct lr_sample *s)
{
  struct nw_sb_worker *w = nw_sb_worker_at(base, h, nr);
  struct lr_slot *last = &r->slots[nr];
  int64_t pid = __atomic_load_n(&w->pid, __ATOMIC_ACQUIRE), busy, requests = 0, started, gained;
  int up = nr == r->own || (pid != 0 && __atomic_load_n(&w->serving, __ATOMIC_ACQUIRE) != 0);
  uint32_t i;

  busy = __atomic_load_n(&w->histograms[NW_SB_REQUEST_DURATION].sum_us, __ATOMIC_RELAXED);
  for (i = 0; i < h->threads; i++) {
    struct nw_sb_thread *t = nw_sb_thread_at(w, h, i);
    if ((started = nw_sb_started_us(t))) {
      busy += now > started ? now - started : 0;
      s->in_flight += up;
    }
    requests += nw_sb_requests(t);
  }
  if (r->sampled_us) {
    /* a new process in the slot counts from 0 (its reset) */
    gained = last->pid == pid ? busy - last->busy_us : busy;
    s->busy_us += gained > 0 ? gained : 0;
    gained = last->pid == pid ? requests - last->requests : requests;
    s->requests += gained > 0 ? gained : 0;
  }
  last->pid = pid;
  last->busy_us = busy;
  last->requests = requests;
  if (up) {
    s->threads += r->threads;
    s->queue += __atomic_load_n(&w->queued, __ATOMIC_ACQUIRE);
  }
}

/* A sample at now (CLOCK_MONOTONIC us): the averages move and the line is
 * made again. */
static void refresh(load_report *r, int64_t now)
{
  const struct nw_sb_header *h;
  char *base = nw_scoreboard_base(r->board, &h);
  uint32_t span = __atomic_load_n(&((const struct nw_sb_header *)base)->worker_span, __ATOMIC_ACQUIRE), nr;
  struct lr_sample s;
  double dt = (double)(now - r->sampled_us), busy, a;

  /* a server with no master (Server.standalone) sets no span */
  if (span <= r->own) span = r->own + 1;
  if (span > r->nslots) span = r->nslots;
  memset(&s, 0, sizeof(s));
  for (nr = 0; nr < span; nr++) sample_slot(r, base, h, nr, now, &s);
  s.queue += listen_queue(r);
  if (!r->sampled_us) {
    /* nothing to measure a rate against yet: the threads busy now */
    r->utilization = s.threads ? clamp01((double)s.in_flight / (double)s.threads) : 0;
  } else if (dt > 0) {
    busy = s.threads ? clamp01((double)s.busy_us / ((double)s.threads * dt)) : 0;
    a = 1 - exp(-dt / SMOOTHING_US);
    r->utilization += a * (busy - r->utilization);
    r->rps += a * ((double)s.requests * 1e6 / dt - r->rps);
  }
  r->sampled_us = now;
  r->queue = s.queue;
  make_line(r);
}

/* For ResponseHead (response.c): the whole header line as it is now, a
 * sample taken first when the last one is REFRESH_US old. */
const char *nw_load_report_line(VALUE report, long *len)
{
  load_report *r = RTYPEDDATA_DATA(report); /* checked by ResponseHead#initialize */
  int64_t now = nw_sb_now_us();
  if (!r->sampled_us || now - r->sampled_us >= REFRESH_US) refresh(r, now);
  *len = r->line_len;
  return r->line;
}

int nw_load_report_p(VALUE obj) { return rb_typeddata_is_kind_of(obj, &report_type); }

/*
 * new(scoreboard, slot, threads): the report of the workers in scoreboard,
 * read by the worker in slot (up while it reports, whatever its slot says),
 * each worker counted with threads request threads.
 */
static VALUE report_initialize(VALUE self, VALUE board, VALUE vslot, VALUE vthreads)
{
  load_report *r = get_report(self);
  const struct nw_sb_header *h;
  long slot = NUM2LONG(vslot), threads = NUM2LONG(vthreads);

  nw_scoreboard_base(board, &h);
  if (slot < 0 || slot >= (long)h->workers) rb_raise(rb_eIndexError, "no scoreboard slot %ld", slot);
  if (threads < 1) rb_raise(rb_eArgError, "threads must be at least 1, got %ld", threads);
  if (r->slots) rb_raise(rb_eRuntimeError, "LoadReport already initialized");
  r->board = board;
  r->own = (uint32_t)slot;
  r->threads = threads;
  r->nslots = h->workers;
  r->slots = ZALLOC_N(struct lr_slot, h->workers);
  make_line(r);
  return self;
}

/* #listeners = descriptors: the listeners whose accept queue counts; those
 * that are not listening TCP sockets (Unix sockets) are left out. */
static VALUE report_set_listeners(VALUE self, VALUE fds)
{
  load_report *r = get_report(self);
  struct tcp_info info;
  socklen_t len;
  long i;

  Check_Type(fds, T_ARRAY);
  r->nfds = 0;
  for (i = 0; i < RARRAY_LEN(fds) && r->nfds < MAX_LISTENERS; i++) {
    int fd = NUM2INT(RARRAY_AREF(fds, i));
    len = sizeof(info);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) == 0 && info.tcpi_state == TCP_LISTEN)
      r->fds[r->nfds++] = fd;
  }
  return fds;
}

/* #listener_count -> Integer: the listeners counted */
static VALUE report_listener_count(VALUE self) { return INT2FIX(get_report(self)->nfds); }

static VALUE line_value(const load_report *r)
{
  long skip = (long)sizeof(HEADER_NAME ": ") - 1;
  return rb_str_new(r->line + skip, r->line_len - skip - 2);
}

/* #value -> String: the header's value as the next response carries it */
static VALUE report_value(VALUE self)
{
  long len;
  nw_load_report_line(self, &len);
  return line_value(get_report(self));
}

/* #refresh(now) -> String: a sample taken as of now (CLOCK_MONOTONIC
 * microseconds, as Process.clock_gettime(Process::CLOCK_MONOTONIC,
 * :microsecond)), and the value it gives */
static VALUE report_refresh(VALUE self, VALUE now)
{
  load_report *r = get_report(self);
  refresh(r, NUM2LL(now));
  return line_value(r);
}

/* LoadReport.format(utilization, rps, queue) -> String: the value for
 * these numbers */
static VALUE report_s_format(VALUE klass, VALUE utilization, VALUE rps, VALUE queue)
{
  char buf[LINE_MAX_BYTES];
  int len = format_value(buf, sizeof(buf), NUM2DBL(utilization), NUM2DBL(rps), NUM2LL(queue));
  return rb_str_new(buf, len);
}

void nw_init_load_report(void)
{
  cLoadReport = rb_define_class_under(nw_mNarwhal, "LoadReport", rb_cObject);
  rb_define_alloc_func(cLoadReport, report_alloc);
  rb_define_method(cLoadReport, "initialize", report_initialize, 3);
  rb_define_method(cLoadReport, "listeners=", report_set_listeners, 1);
  rb_define_method(cLoadReport, "listener_count", report_listener_count, 0);
  rb_define_method(cLoadReport, "value", report_value, 0);
  rb_define_method(cLoadReport, "refresh", report_refresh, 1);
  rb_define_singleton_method(cLoadReport, "format", report_s_format, 3);
  rb_define_const(cLoadReport, "HEADER", rb_obj_freeze(rb_str_new_cstr(HEADER_NAME)));
  rb_define_const(cLoadReport, "REFRESH", DBL2NUM((double)REFRESH_US / 1e6));
  rb_define_const(cLoadReport, "SMOOTHING", DBL2NUM((double)SMOOTHING_US / 1e6));
}
