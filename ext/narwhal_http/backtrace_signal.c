/*
 * Narwhal::BacktraceSignal: where a request is stuck, asked of the thread
 * that runs it by a signal, so that it is known even when that thread
 * holds the GVL in C (a busy loop in an extension, a blocking call that
 * does not release it), where no Ruby code of the worker can run.
 *
 * The master sends SIGURG to the thread (tgkill(2): its kernel id is in
 * the scoreboard) just before it kills the worker for `timeout`. The
 * handler, on that thread, reads the thread's Ruby frames as a sampling
 * profiler does (rb_profile_frames: no allocation, no GVL, no lock),
 * writes them to stderr, the server's log, in one write(2), counts it in
 * the thread's scoreboard sub-slot, which the master watches, and stays
 * in the handler until the kill (PARK_SECONDS).
 *
 * SIGURG because its default action is to be ignored: a process without
 * the handler (a worker still booting, a Ruby process of the app's) is
 * not harmed by it. The kernel sends it on its own only for TCP urgent
 * data to a socket whose owner was set (F_SETOWN), which nothing here
 * asks for.
 */
#include "narwhal_http.h"
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <ruby/debug.h>
#include "scoreboard.h"

#define BACKTRACE_SIGNAL SIGURG
/* After its backtrace the thread stays in the handler this long at most
 * (the master kills the worker within milliseconds): the call it was in
 * must not go on, as a sleep(3) or poll(2) the signal cut short would,
 * and finish the request the master is answering 504. */
#define PARK_SECONDS 5
#define PARK_STEP_NS (10 * 1000 * 1000)
/* Frames written at most: the innermost ones, where it is stuck. */
#define MAX_FRAMES 48
/* The whole backtrace goes out in one write of at most this many bytes. */
#define TEXT_BYTES 8192

static int installed;

/* Appends n bytes of s to buf (len used of TEXT_BYTES), cut at the end. */
static void put(char *buf, size_t *len, const char *s, size_t n)
{
  if (n > TEXT_BYTES - *len) n = TEXT_BYTES - *len;
  memcpy(buf + *len, s, n);
  *len += n;
}

static void put_str(char *buf, size_t *len, const char *s) { put(buf, len, s, strlen(s)); }

/* A Ruby String's bytes, or nothing for what is not one. */
static void put_value(char *buf, size_t *len, VALUE v)
{
  if (RB_TYPE_P(v, T_STRING)) put(buf, len, RSTRING_PTR(v), (size_t)RSTRING_LEN(v));
}

static void put_int(char *buf, size_t *len, long n)
{
  char digits[24];
  int i = (int)sizeof(digits);
  int negative = n < 0;
  unsigned long u = negative ? 0UL - (unsigned long)n : (unsigned long)n;
  do {
    digits[--i] = (char)('0' + u % 10);
    u /= 10;
  } while (u && i > 1);
  if (negative) digits[--i] = '-';
  put(buf, len, digits + i, sizeof(digits) - (size_t)i);
}

/* Waits for the kill (see PARK_SECONDS); nanosleep(2) is async-signal-safe. */
static void park(void)
{
  struct timespec step = { 0, PARK_STEP_NS };
  long rounds = PARK_SECONDS * (1000L * 1000 * 1000 / PARK_STEP_NS);
  while (rounds-- > 0) nanosleep(&step, NULL);
}

/* Only async-signal-safe calls, and reads of the frames' own strings. */
static void on_backtrace_signal(int sig)
{
  VALUE frames[MAX_FRAMES];
  struct nw_sb_thread *own_slot;
  int lines[MAX_FRAMES];
  char buf[TEXT_BYTES];
  size_t len = 0;
  int saved = errno, n, i;
  ssize_t written;

  n = rb_profile_frames(0, MAX_FRAMES, frames, lines);
  put_str(buf, &len, "narwhal: backtrace of pid=");
  put_int(buf, &len, (long)getpid());
  put_str(buf, &len, " tid=");
  put_int(buf, &len, (long)syscall(SYS_gettid));
  put_str(buf, &len, n > 0 ? ", innermost frame first:\n" : ": no Ruby frames\n");
  for (i = 0; i < n; i++) {
    VALUE path = rb_profile_frame_path(frames[i]);
    put_str(buf, &len, "    ");
    if (NIL_P(path)) { /* a method written in C: its name */
      put_str(buf, &len, "(C method):in `");
      put_value(buf, &len, rb_profile_frame_method_name(frames[i]));
    } else {
      put_value(buf, &len, path);
      put_str(buf, &len, ":");
      put_int(buf, &len, lines[i]);
      put_str(buf, &len, ":in `");
      put_value(buf, &len, rb_profile_frame_label(frames[i]));
    }
    put_str(buf, &len, "'\n");
  }
  do {
    written = write(STDERR_FILENO, buf, len);
  } while (written < 0 && errno == EINTR);
  /* the calling thread's sub-slot (ThreadSlot#bind_thread!): the master
   * waits for this count */
  own_slot = nw_bound_thread_slot();
  if (own_slot) __atomic_add_fetch(&own_slot->backtraces, 1, __ATOMIC_RELEASE);
  park();
  errno = saved;
  (void)sig;
}

/* BacktraceSignal.install -> true: this process answers the signal (once
 * per process; a forked worker keeps its parent's handler) */
static VALUE backtrace_signal_install(VALUE self)
{
  struct sigaction sa;
  if (installed) return Qtrue;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_backtrace_signal;
  sa.sa_flags = SA_RESTART; /* the stuck call goes on as if nothing happened */
  sigemptyset(&sa.sa_mask);
  if (sigaction(BACKTRACE_SIGNAL, &sa, NULL) != 0) rb_sys_fail("sigaction(SIGURG)");
  installed = 1;
  return Qtrue;
}

/* BacktraceSignal.request(pid, tid) -> true, or false when that thread is
 * gone: thread tid of process pid writes its backtrace to its stderr */
static VALUE backtrace_signal_request(VALUE self, VALUE pid, VALUE tid)
{
  if (syscall(SYS_tgkill, NUM2INT(pid), NUM2INT(tid), BACKTRACE_SIGNAL) == 0) return Qtrue;
  if (errno == ESRCH) return Qfalse;
  rb_sys_fail("tgkill(2)");
  return Qfalse;
}

void nw_init_backtrace_signal(void)
{
  VALUE m = rb_define_module_under(nw_mNarwhal, "BacktraceSignal");
  rb_define_module_function(m, "install", backtrace_signal_install, 0);
  rb_define_module_function(m, "request", backtrace_signal_request, 2);
}
