/*
 * The scoreboard: a small anonymous shared mapping created by the master
 * before it forks. Each worker owns one slot and records when its current
 * request started (0 while idle) and how many it has served; the master
 * reads the slots to find workers stuck past `timeout`. No signals, no
 * pipes, no system calls on the request path.
 */
#include "narwhal_http.h"
#include <sys/mman.h>
#include <time.h>

/* Upper bound on slots, so the mapping never has to grow after forking. */
#define NW_SCOREBOARD_MAX_SLOTS 4096

struct nw_slot {
  int64_t started_ms; /* CLOCK_MONOTONIC ms when the request started; 0 = idle */
  int64_t requests;   /* requests served since the worker started */
};

struct nw_scoreboard {
  struct nw_slot *slots;
  long count;
};

static void board_free(void *ptr)
{
  struct nw_scoreboard *b = ptr;
  if (b->slots) munmap(b->slots, sizeof(struct nw_slot) * (size_t)b->count);
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
  b->slots = NULL;
  b->count = 0;
  return obj;
}

static int64_t monotonic_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Scoreboard.new(slots) */
static VALUE board_init(VALUE self, VALUE vcount)
{
  struct nw_scoreboard *b;
  long count = NUM2LONG(vcount);
  void *mem;

  TypedData_Get_Struct(self, struct nw_scoreboard, &board_type, b);
  if (count < 1 || count > NW_SCOREBOARD_MAX_SLOTS)
    rb_raise(rb_eArgError, "scoreboard slots must be 1..%d", NW_SCOREBOARD_MAX_SLOTS);
  mem = mmap(NULL, sizeof(struct nw_slot) * (size_t)count, PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) rb_sys_fail("mmap");
  b->slots = mem;
  b->count = count;
  return self;
}

static struct nw_slot *slot_of(VALUE self, VALUE vslot)
{
  struct nw_scoreboard *b;
  long i = NUM2LONG(vslot);
  TypedData_Get_Struct(self, struct nw_scoreboard, &board_type, b);
  if (i < 0 || i >= b->count) rb_raise(rb_eIndexError, "no scoreboard slot %ld", i);
  return &b->slots[i];
}

/* #request_started(slot): the worker began a request now */
static VALUE board_started(VALUE self, VALUE vslot)
{
  struct nw_slot *s = slot_of(self, vslot);
  __atomic_store_n(&s->started_ms, monotonic_ms(), __ATOMIC_RELEASE);
  return Qnil;
}

/* #request_finished(slot): the worker is idle again */
static VALUE board_finished(VALUE self, VALUE vslot)
{
  struct nw_slot *s = slot_of(self, vslot);
  __atomic_store_n(&s->started_ms, 0, __ATOMIC_RELEASE);
  __atomic_add_fetch(&s->requests, 1, __ATOMIC_RELAXED);
  return Qnil;
}

/* #busy_for(slot) -> Float seconds on the current request, or nil when idle */
static VALUE board_busy_for(VALUE self, VALUE vslot)
{
  struct nw_slot *s = slot_of(self, vslot);
  int64_t started = __atomic_load_n(&s->started_ms, __ATOMIC_ACQUIRE);
  if (started == 0) return Qnil;
  return DBL2NUM((double)(monotonic_ms() - started) / 1000.0);
}

/* #requests(slot) -> Integer */
static VALUE board_requests(VALUE self, VALUE vslot)
{
  return LL2NUM(__atomic_load_n(&slot_of(self, vslot)->requests, __ATOMIC_RELAXED));
}

/* #reset(slot): a new worker takes the slot */
static VALUE board_reset(VALUE self, VALUE vslot)
{
  struct nw_slot *s = slot_of(self, vslot);
  __atomic_store_n(&s->started_ms, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&s->requests, 0, __ATOMIC_RELEASE);
  return Qnil;
}

static VALUE board_size(VALUE self)
{
  struct nw_scoreboard *b;
  TypedData_Get_Struct(self, struct nw_scoreboard, &board_type, b);
  return LONG2NUM(b->count);
}

void nw_init_scoreboard(void)
{
  VALUE c = rb_define_class_under(nw_mNarwhal, "Scoreboard", rb_cObject);
  rb_define_const(c, "MAX_SLOTS", INT2NUM(NW_SCOREBOARD_MAX_SLOTS));
  rb_define_alloc_func(c, board_alloc);
  rb_define_method(c, "initialize", board_init, 1);
  rb_define_method(c, "request_started", board_started, 1);
  rb_define_method(c, "request_finished", board_finished, 1);
  rb_define_method(c, "busy_for", board_busy_for, 1);
  rb_define_method(c, "requests", board_requests, 1);
  rb_define_method(c, "reset", board_reset, 1);
  rb_define_method(c, "size", board_size, 0);
}
