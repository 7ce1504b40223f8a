/*
 * Free space of a file system, for the response spool, which must never
 * fill the disk it spools to (response_spool_disk_reserve). Ruby has no
 * statvfs(3).
 */
#include "narwhal_http.h"
#include <errno.h>
#include <sys/statvfs.h>
#include <ruby/thread.h>

struct statvfs_args {
  const char *path;
  struct statvfs st;
  int result;
  int error;
};

static void *statvfs_nogvl(void *ptr)
{
  struct statvfs_args *a = ptr;
  a->result = statvfs(a->path, &a->st);
  a->error = errno;
  return NULL;
}

/*
 * Narwhal.free_bytes(path) -> Integer
 *
 * Bytes an unprivileged process may still write on the file system that
 * holds path (f_bavail blocks of f_frsize bytes). Raises SystemCallError.
 */
static VALUE nw_free_bytes(VALUE self, VALUE path)
{
  struct statvfs_args a;
  FilePathValue(path);
  a.path = StringValueCStr(path);
  /* a network file system may take its time to answer */
  rb_thread_call_without_gvl(statvfs_nogvl, &a, RUBY_UBF_IO, NULL);
  RB_GC_GUARD(path);
  if (a.result != 0) {
    errno = a.error;
    rb_sys_fail_str(path);
  }
  return ULL2NUM((unsigned long long)a.st.f_bavail * (unsigned long long)a.st.f_frsize);
}

void nw_init_free_space(void)
{
  rb_define_module_function(nw_mNarwhal, "free_bytes", nw_free_bytes, 1);
}
