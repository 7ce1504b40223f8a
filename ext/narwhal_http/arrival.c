/*
 * Narwhal::Arrival: when a request's bytes reached the host, from the
 * kernel, so that its queue time is known with no proxy in front.
 *
 * A TCP listener with SO_TIMESTAMPNS passes the option on to every
 * connection it accepts; each recvmsg(2) on one then carries
 * SCM_TIMESTAMPNS, the wall-clock time the last segment it read arrived
 * (nanoseconds). A request waiting in the listen queue, or kept alive in
 * a busy worker's epoll set, waits from that moment: its queue time is
 * the time of the server's start on it minus that stamp.
 *
 * Unix stream sockets keep no such stamp: their reads give 0.0 (unknown).
 * Reading this way costs no system call more than a read: the stamp comes
 * with the bytes.
 */
#include "narwhal_http.h"
#include <errno.h>
#include <time.h>
#include <sys/socket.h>

/* Room for one SCM_TIMESTAMPNS control message. */
#define STAMP_CONTROL_BYTES CMSG_SPACE(sizeof(struct timespec))

static VALUE sym_wait_readable;

double nw_realtime(void)
{
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

double nw_arrival_since(double arrived)
{
  double waited;
  if (arrived <= 0) return -1;
  waited = nw_realtime() - arrived;
  return waited < 0 ? 0 : waited; /* the wall clock stepped back */
}

int nw_arrival_enable(int fd)
{
  int on = 1;
  return setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on));
}

ssize_t nw_recv_stamped(int fd, char *buf, size_t len, double *arrived)
{
  union {
    char bytes[STAMP_CONTROL_BYTES];
    struct cmsghdr align;
  } control;
  struct iovec iov = { buf, len };
  struct msghdr msg;
  struct cmsghdr *c;
  ssize_t n;

  memset(&msg, 0, sizeof(msg));
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  do {
    msg.msg_control = control.bytes;
    msg.msg_controllen = sizeof(control.bytes);
    n = recvmsg(fd, &msg, MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  *arrived = 0.0;
  if (n <= 0) return n;
  for (c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
      struct timespec ts;
      memcpy(&ts, CMSG_DATA(c), sizeof(ts));
      *arrived = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    }
  }
  return n;
}

/* Arrival.enable(fd) -> true, or false where the socket takes no stamps */
static VALUE arrival_enable(VALUE self, VALUE fd)
{
  return nw_arrival_enable(NUM2INT(fd)) == 0 ? Qtrue : Qfalse;
}

/*
 * Arrival.recv(fd, buf, size) -> Float, nil or :wait_readable
 *
 * Reads at most size bytes from the socket fd, without waiting, into buf
 * (its contents replaced, as IO#read_nonblock's buffer). The answer is
 * when they arrived (seconds since the epoch; 0.0 when the socket keeps
 * no stamp), nil at the end of the stream, :wait_readable when there is
 * nothing to read. Other errors raise SystemCallError. A Float stamp is
 * an immediate: nothing is allocated.
 */
static VALUE arrival_recv(VALUE self, VALUE fd, VALUE buf, VALUE vsize)
{
  long size = NUM2LONG(vsize);
  double arrived;
  ssize_t n;

  StringValue(buf);
  if (size <= 0) rb_raise(rb_eArgError, "size must be positive");
  rb_str_modify(buf); /* its own bytes, not a copy's */
  rb_str_set_len(buf, 0);
  rb_str_modify_expand(buf, size);
  n = nw_recv_stamped(NUM2INT(fd), RSTRING_PTR(buf), (size_t)size, &arrived);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return sym_wait_readable;
    rb_syserr_fail(errno, "recvmsg(2)");
  }
  if (n == 0) return Qnil;
  rb_str_set_len(buf, (long)n);
  return DBL2NUM(arrived);
}

/* Arrival.since(stamp) -> Float or nil: seconds from stamp (a #recv's
 * answer) to now, never below 0 (the wall clock may step back); nil for
 * 0.0, no stamp. The kernel's queue time of a request about to start. */
static VALUE arrival_since(VALUE self, VALUE stamp)
{
  double waited = nw_arrival_since(NUM2DBL(stamp));
  return waited < 0 ? Qnil : DBL2NUM(waited);
}

void nw_init_arrival(void)
{
  VALUE m = rb_define_module_under(nw_mNarwhal, "Arrival");
  rb_define_module_function(m, "enable", arrival_enable, 1);
  rb_define_module_function(m, "recv", arrival_recv, 3);
  rb_define_module_function(m, "since", arrival_since, 1);
  sym_wait_readable = ID2SYM(rb_intern("wait_readable"));
}
