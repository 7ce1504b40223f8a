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

VALUE nw_fstring(const char *ptr, long len)
{
  return rb_enc_interned_str(ptr, len, rb_utf8_encoding());
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
