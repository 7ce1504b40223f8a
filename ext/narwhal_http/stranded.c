/*
 * Narwhal::Stranded: the master answers the clients of a worker it is
 * about to kill for `timeout`, on the worker's own sockets, so that they
 * get a response (504, 503) and not a reset. The worker needs to run no
 * code for it: it is stopped (SIGSTOP) while the master works, which
 * holds even when its threads are stuck in C with the GVL held.
 *
 * The master takes a copy of each socket from the stopped worker with
 * pidfd_getfd(2) (Linux 5.6; allowed to a parent over its child, and to
 * root), writes the answer without waiting, ends its side (FIN after the
 * answer) and reads away what the client sent and nobody will read: a
 * socket closed with unread bytes is reset, and a reset may make the
 * client drop the answer before reading it.
 */
#include "narwhal_http.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>
#include <netinet/in.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

/* Bytes read and dropped per recv while draining a socket. */
#define DRAIN_BYTES 4096
/* At most this much is drained from one socket (a client still sending). */
#define DRAIN_MAX (256 * 1024)
/* The longest "socket:[inode]" link text read from /proc. */
#define LINK_BYTES 64
/* Listening sockets compared against at most (a master rarely has more than a few). */
#define MAX_LISTENERS 64
/* "/proc/<pid>/fd" */
#define PROC_PATH_BYTES 64

static int pidfd_for(VALUE pid)
{
  int pidfd = (int)syscall(SYS_pidfd_open, NUM2INT(pid), 0);
  if (pidfd < 0) rb_sys_fail("pidfd_open(2)");
  return pidfd;
}

/* The worker's descriptor fd as one of this process's, or -1. */
static int take(int pidfd, int fd)
{
  return (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
}

static void drain(int sock)
{
  char scratch[DRAIN_BYTES];
  ssize_t n;
  size_t total = 0;
  while (total < DRAIN_MAX && (n = recv(sock, scratch, sizeof(scratch), MSG_DONTWAIT)) > 0) total += (size_t)n;
}

/* Writes bytes to sock without waiting, then FIN, then drains it: bytes
 * the socket took (-1: none). */
static ssize_t answer_on(int sock, VALUE bytes)
{
  ssize_t sent = send(sock, RSTRING_PTR(bytes), (size_t)RSTRING_LEN(bytes), MSG_DONTWAIT | MSG_NOSIGNAL);
  shutdown(sock, SHUT_WR);
  drain(sock);
  return sent;
}

/*
 * Stranded.answer(pid, fd, bytes) -> Integer or nil
 *
 * Writes bytes to the socket fd of stopped process pid, then ends it (see
 * the top). The bytes the socket took, or nil when it could not be
 * reached (the descriptor is gone, or not a socket: ENOTSOCK) or took none.
 */
static VALUE stranded_answer(VALUE self, VALUE pid, VALUE fd, VALUE bytes)
{
  int pidfd, sock;
  ssize_t sent;

  StringValue(bytes);
  pidfd = pidfd_for(pid);
  sock = take(pidfd, NUM2INT(fd));
  close(pidfd);
  if (sock < 0) return Qnil;
  sent = answer_on(sock, bytes);
  close(sock);
  return sent < 0 ? Qnil : LONG2NUM((long)sent);
}

/* The listening sockets' own addresses, to tell the worker's client
 * connections from the app's other sockets (a database's, say). */
struct listeners {
  struct sockaddr_storage addr[MAX_LISTENERS];
  socklen_t len[MAX_LISTENERS];
  int count;
};

static int same_port(const struct sockaddr_storage *a, const struct sockaddr_storage *l)
{
  if (a->ss_family == AF_INET && l->ss_family == AF_INET) {
    const struct sockaddr_in *x = (const void *)a, *y = (const void *)l;
    return x->sin_port == y->sin_port &&
           (y->sin_addr.s_addr == htonl(INADDR_ANY) || x->sin_addr.s_addr == y->sin_addr.s_addr);
  }
  if (a->ss_family == AF_INET6 && l->ss_family == AF_INET6) {
    const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)l;
    return x->sin6_port == y->sin6_port &&
           (IN6_IS_ADDR_UNSPECIFIED(&y->sin6_addr) || !memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)));
  }
  return 0;
}

/* sock was accepted from one of the listeners: its local address is a
 * listener's (an IPv4 client of a dual-stack [::] listener has its port) */
static int accepted_from(int sock, const struct listeners *ls)
{
  struct sockaddr_storage a;
  socklen_t len = sizeof(a);
  int i, listening = 0;
  socklen_t opt_len = sizeof(listening);

  if (getsockopt(sock, SOL_SOCKET, SO_ACCEPTCONN, &listening, &opt_len) != 0 || listening) return 0;
  if (getsockname(sock, (struct sockaddr *)&a, &len) != 0) return 0;
  for (i = 0; i < ls->count; i++) {
    const struct sockaddr_storage *l = &ls->addr[i];
    if (a.ss_family == AF_UNIX && l->ss_family == AF_UNIX) {
      if (len == ls->len[i] && !memcmp(&a, l, len)) return 1;
    } else if (same_port(&a, l)) {
      return 1;
    } else if (a.ss_family == AF_INET6 && l->ss_family == AF_INET &&
               ((const struct sockaddr_in6 *)(const void *)&a)->sin6_port ==
                   ((const struct sockaddr_in *)(const void *)l)->sin_port) {
      return 1;
    }
  }
  return 0;
}

static void read_listeners(VALUE fds, struct listeners *ls)
{
  long i;
  ls->count = 0;
  for (i = 0; i < RARRAY_LEN(fds) && ls->count < MAX_LISTENERS; i++) {
    socklen_t len = sizeof(ls->addr[0]);
    if (getsockname(NUM2INT(RARRAY_AREF(fds, i)), (struct sockaddr *)&ls->addr[ls->count], &len) == 0)
      ls->len[ls->count++] = len;
  }
}

static int is_socket_link(int dir, const char *name)
{
  char link[LINK_BYTES];
  ssize_t n = readlinkat(dir, name, link, sizeof(link) - 1);
  if (n <= 0) return 0;
  link[n] = '\0';
  return strncmp(link, "socket:", 7) == 0;
}

/* Bytes the client sent that the socket holds unread. */
static int unread(int sock)
{
  int bytes = 0;
  return ioctl(sock, FIONREAD, &bytes) == 0 && bytes > 0;
}

/*
 * Stranded.answer_waiting(pid, listener_fds, skip_fds, bytes) -> Integer
 *
 * Answers bytes on every client connection of stopped process pid that
 * holds a request no one has read (unread bytes on a socket accepted from
 * one of listener_fds, the master's), but those in skip_fds (answered
 * already); the count answered.
 */
static VALUE stranded_answer_waiting(VALUE self, VALUE pid, VALUE listener_fds, VALUE skip_fds, VALUE bytes)
{
  struct listeners ls;
  char path[PROC_PATH_BYTES];
  struct dirent *e;
  DIR *d;
  int pidfd, count = 0;

  StringValue(bytes);
  Check_Type(listener_fds, T_ARRAY);
  Check_Type(skip_fds, T_ARRAY);
  read_listeners(listener_fds, &ls);
  snprintf(path, sizeof(path), "/proc/%d/fd", NUM2INT(pid));
  if (!(d = opendir(path))) rb_sys_fail(path);
  pidfd = (int)syscall(SYS_pidfd_open, NUM2INT(pid), 0);
  if (pidfd < 0) {
    closedir(d);
    rb_sys_fail("pidfd_open(2)");
  }
  while ((e = readdir(d))) {
    int fd, sock;
    if (e->d_name[0] < '0' || e->d_name[0] > '9' || !is_socket_link(dirfd(d), e->d_name)) continue;
    fd = atoi(e->d_name);
    if (rb_ary_includes(skip_fds, INT2FIX(fd)) == Qtrue || (sock = take(pidfd, fd)) < 0) continue;
    if (accepted_from(sock, &ls) && unread(sock) && answer_on(sock, bytes) > 0) count++;
    close(sock);
  }
  close(pidfd);
  closedir(d);
  return INT2FIX(count);
}

void nw_init_stranded(void)
{
  VALUE m = rb_define_module_under(nw_mNarwhal, "Stranded");
  rb_define_module_function(m, "answer", stranded_answer, 3);
  rb_define_module_function(m, "answer_waiting", stranded_answer_waiting, 4);
}
