/*
 * Non-blocking sendfile(2) for response files. IO.copy_stream waits for a
 * slow client without any time limit; this returns as soon as the socket is
 * full so that the caller can wait with its own write timeout.
 */
#include "narwhal_http.h"
#include <errno.h>
#include <ruby/thread.h>

#ifdef __linux__
#include <sys/sendfile.h>

struct sendfile_args {
  int out_fd;
  int in_fd;
  off_t offset;
  size_t count;
  ssize_t result;
  int error;
};

static void *sendfile_nogvl(void *ptr)
{
  struct sendfile_args *a = ptr;
  a->result = sendfile(a->out_fd, a->in_fd, &a->offset, a->count);
  a->error = errno;
  return NULL;
}

/*
 * Narwhal.sendfile_nonblock(out_fd, in_fd, offset, count) -> Integer or nil
 *
 * Bytes sent (0 at end of file), or nil when the socket cannot take more
 * now. Other failures raise SystemCallError.
 */
static VALUE nw_sendfile_nonblock(VALUE self, VALUE out_fd, VALUE in_fd, VALUE offset, VALUE count)
{
  struct sendfile_args a;
  a.out_fd = NUM2INT(out_fd);
  a.in_fd = NUM2INT(in_fd);
  a.offset = (off_t)NUM2LL(offset);
  a.count = (size_t)NUM2SIZET(count);
  /* the file may not be in the page cache: reading it can block */
  rb_thread_call_without_gvl(sendfile_nogvl, &a, RUBY_UBF_IO, NULL);
  if (a.result < 0) {
    if (a.error == EAGAIN || a.error == EWOULDBLOCK) return Qnil;
    errno = a.error;
    rb_sys_fail("sendfile");
  }
  return SSIZET2NUM(a.result);
}
#endif

void nw_init_sendfile(void)
{
#ifdef __linux__
  rb_define_module_function(nw_mNarwhal, "sendfile_nonblock", nw_sendfile_nonblock, 4);
#endif
}
