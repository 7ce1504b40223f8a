/*
 * Rack env keys and common values, created once as interned frozen strings so
 * every request reuses the same objects as Ruby's frozen literals.
 */
#include "narwhal_http.h"

VALUE nw_key_REQUEST_METHOD, nw_key_REQUEST_URI, nw_key_REQUEST_PATH,
    nw_key_PATH_INFO, nw_key_QUERY_STRING, nw_key_SERVER_NAME,
    nw_key_SERVER_PORT, nw_key_SERVER_PROTOCOL, nw_key_HTTP_VERSION,
    nw_key_HTTP_HOST, nw_key_CONTENT_LENGTH, nw_key_CONTENT_TYPE,
    nw_key_URL_SCHEME, nw_key_HTTP_X_REQUEST_START, nw_key_HTTP_X_QUEUE_START,
    nw_val_HTTP_1_1, nw_val_HTTP_1_0, nw_val_port_80, nw_val_port_443,
    nw_val_https, nw_val_http, nw_val_slash;

/*
 * The interned strings a request's head asks for (its method, header
 * names as env keys, its host) come from a small cache before Ruby's
 * table of interned strings: looking one up there hashes it and costs
 * about 650 instructions, a hit here about 60. A slot taken by another
 * string is simply replaced (the one it held stays interned while used).
 */
#define FSTRING_CACHE_SLOTS 256 /* a power of 2 */
#define FSTRING_CACHE_MAX_LEN 48
#define FNV_OFFSET 2166136261u
#define FNV_PRIME 16777619u

typedef struct {
  VALUE str; /* Qfalse: empty */
  long len;
  char bytes[FSTRING_CACHE_MAX_LEN];
} fstring_slot;

/* each str is a GC root (registered): kept alive, and never moved by
 * GC.compact, which would leave the pointer here stale */
static fstring_slot fstring_cache[FSTRING_CACHE_SLOTS];

VALUE nw_fstring(const char *ptr, long len)
{
  unsigned int h = FNV_OFFSET;
  fstring_slot *slot;
  long i;
  VALUE str;

  if (len > FSTRING_CACHE_MAX_LEN) return rb_enc_interned_str(ptr, len, rb_utf8_encoding());
  for (i = 0; i < len; i++) h = (h ^ (unsigned char)ptr[i]) * FNV_PRIME;
  slot = &fstring_cache[h & (FSTRING_CACHE_SLOTS - 1)];
  if (slot->str != Qfalse && slot->len == len && memcmp(slot->bytes, ptr, (size_t)len) == 0) return slot->str;
  str = rb_enc_interned_str(ptr, len, rb_utf8_encoding());
  slot->str = str;
  slot->len = len;
  memcpy(slot->bytes, ptr, (size_t)len);
  return str;
}

/* An interned frozen string kept alive for the life of the process. */
VALUE nw_keep_fstring(const char *s)
{
  VALUE v = nw_fstring(s, (long)strlen(s));
  rb_gc_register_mark_object(v);
  return v;
}

void nw_init_env_keys(void)
{
  long i;
  for (i = 0; i < FSTRING_CACHE_SLOTS; i++) {
    fstring_cache[i].str = Qfalse;
    rb_gc_register_address(&fstring_cache[i].str);
  }
  nw_key_REQUEST_METHOD = nw_keep_fstring("REQUEST_METHOD");
  nw_key_REQUEST_URI = nw_keep_fstring("REQUEST_URI");
  nw_key_REQUEST_PATH = nw_keep_fstring("REQUEST_PATH");
  nw_key_PATH_INFO = nw_keep_fstring("PATH_INFO");
  nw_key_QUERY_STRING = nw_keep_fstring("QUERY_STRING");
  nw_key_SERVER_NAME = nw_keep_fstring("SERVER_NAME");
  nw_key_SERVER_PORT = nw_keep_fstring("SERVER_PORT");
  nw_key_SERVER_PROTOCOL = nw_keep_fstring("SERVER_PROTOCOL");
  nw_key_HTTP_VERSION = nw_keep_fstring("HTTP_VERSION");
  nw_key_HTTP_HOST = nw_keep_fstring("HTTP_HOST");
  nw_key_CONTENT_LENGTH = nw_keep_fstring("CONTENT_LENGTH");
  nw_key_CONTENT_TYPE = nw_keep_fstring("CONTENT_TYPE");
  nw_key_URL_SCHEME = nw_keep_fstring("rack.url_scheme");
  nw_key_HTTP_X_REQUEST_START = nw_keep_fstring("HTTP_X_REQUEST_START");
  nw_key_HTTP_X_QUEUE_START = nw_keep_fstring("HTTP_X_QUEUE_START");
  nw_val_HTTP_1_1 = nw_keep_fstring("HTTP/1.1");
  nw_val_HTTP_1_0 = nw_keep_fstring("HTTP/1.0");
  nw_val_port_80 = nw_keep_fstring("80");
  nw_val_port_443 = nw_keep_fstring("443");
  nw_val_https = nw_keep_fstring("https");
  nw_val_http = nw_keep_fstring("http");
  nw_val_slash = nw_keep_fstring("/");
}
