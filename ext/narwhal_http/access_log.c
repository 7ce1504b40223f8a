/*
 * Narwhal::AccessLogLine: one access log line, appended to a buffer in a
 * single call. Building it in Ruby took some 25 appends and a regular
 * expression per field, about 5 µs a line; here it is one pass over the
 * fields. Request data (anything a client sent) is escaped so that it
 * cannot break the line; strings that need nothing are copied whole.
 */
#include "narwhal_http.h"
#include <math.h>

#define COMBINED_FIELDS 14 /* buf and the 13 fields of AccessLogLine.combined */
#define JSON_FIELDS 16     /* buf and the 15 fields of AccessLogLine.json */
#define MICROS 1000000LL
#define MICROS_DIGITS 6
/* Durations are written with 6 decimals up to this many seconds (a year);
 * past it the clock is wrong, and the field says so with the largest. */
#define MAX_SECONDS 31536000.0
#define MAX_DIGITS 20 /* of an unsigned 64-bit integer */

static ID id_to_i;

static const char HEXDIGITS[] = "0123456789ABCDEF";
static const char hexdigits[] = "0123456789abcdef";

/* What needs escaping in the combined format, as nginx escapes it:
 * control bytes, the quote, the backslash and non-ASCII bytes, as \xHH;
 * in a bare field (outside quotes) the space too. */
static int combined_unsafe(unsigned char b, int bare)
{
  return b < 0x20 || b > 0x7e || b == '"' || b == '\\' || (bare && b == ' ');
}

static void cat(VALUE buf, const char *ptr, long len) { rb_str_cat(buf, ptr, len); }
#define CAT_LIT(buf, lit) cat((buf), (lit), (long)sizeof(lit) - 1)

/* A field's value as a String, or Qnil when nil. Anything else is written
 * as its to_s. */
static VALUE field_string(VALUE value)
{
  if (NIL_P(value) || RB_TYPE_P(value, T_STRING)) return value;
  return rb_obj_as_string(value);
}

static void combined_escaped(VALUE buf, VALUE str, int bare)
{
  const unsigned char *p = (const unsigned char *)RSTRING_PTR(str);
  long len = RSTRING_LEN(str), start = 0, i;
  char hex[4] = { '\\', 'x', 0, 0 };

  for (i = 0; i < len; i++) {
    if (!combined_unsafe(p[i], bare)) continue;
    if (i > start) cat(buf, (const char *)p + start, i - start);
    hex[2] = HEXDIGITS[p[i] >> 4];
    hex[3] = HEXDIGITS[p[i] & 0xf];
    cat(buf, hex, sizeof(hex));
    start = i + 1;
  }
  if (len > start) cat(buf, (const char *)p + start, len - start);
}

/* A combined field, "-" when absent or empty. */
static void combined_field(VALUE buf, VALUE value, int bare)
{
  VALUE str = field_string(value);
  if (NIL_P(str) || RSTRING_LEN(str) == 0) CAT_LIT(buf, "-");
  else combined_escaped(buf, str, bare);
  RB_GC_GUARD(str);
}

static void combined_quoted(VALUE buf, VALUE value)
{
  CAT_LIT(buf, "\"");
  combined_field(buf, value, 0);
  CAT_LIT(buf, "\"");
}

static void append_uint(VALUE buf, unsigned long long n, int min_digits)
{
  char digits[MAX_DIGITS];
  int at = MAX_DIGITS;
  do {
    digits[--at] = (char)('0' + n % 10);
    n /= 10;
  } while (n > 0 || MAX_DIGITS - at < min_digits);
  cat(buf, digits + at, MAX_DIGITS - at);
}

static void append_integer(VALUE buf, VALUE value)
{
  long long n = NUM2LL(FIXNUM_P(value) || RB_TYPE_P(value, T_BIGNUM) ? value : rb_funcall(value, id_to_i, 0));
  if (n < 0) {
    CAT_LIT(buf, "-");
    append_uint(buf, (unsigned long long)(-(n + 1)) + 1, 1);
  } else {
    append_uint(buf, (unsigned long long)n, 1);
  }
}

/* Seconds (a Float, >= 0) with 6 decimals, or none when nil. */
static void append_seconds(VALUE buf, VALUE value, const char *none, long none_len)
{
  double seconds;
  long long micros;

  if (NIL_P(value)) {
    cat(buf, none, none_len);
    return;
  }
  seconds = NUM2DBL(value);
  if (!(seconds >= 0)) seconds = 0; /* negative, NaN */
  if (seconds > MAX_SECONDS) seconds = MAX_SECONDS;
  micros = llround(seconds * MICROS);
  append_uint(buf, (unsigned long long)(micros / MICROS), 1);
  CAT_LIT(buf, ".");
  append_uint(buf, (unsigned long long)(micros % MICROS), MICROS_DIGITS);
}

/*
 * AccessLogLine.combined(buf, stamp, remote_addr, remote_user, method, uri,
 *               protocol, status, bytes, referer, user_agent, duration,
 *               queue_time, request_id) -> buf
 *
 * Apache's combined format and three fields of our own (see
 * AccessLog::Combined). stamp is "[23/Nov/2026:10:00:00 +0000]", trusted;
 * the request line is "-" without a method.
 */
static VALUE line_combined(int argc, VALUE *argv, VALUE self)
{
  VALUE buf;
  if (argc != COMBINED_FIELDS) rb_error_arity(argc, COMBINED_FIELDS, COMBINED_FIELDS);
  buf = argv[0];
  StringValue(buf);

  combined_field(buf, argv[2], 1);
  CAT_LIT(buf, " - ");
  combined_field(buf, argv[3], 1);
  CAT_LIT(buf, " ");
  cat(buf, StringValuePtr(argv[1]), RSTRING_LEN(argv[1]));
  CAT_LIT(buf, " \"");
  if (NIL_P(argv[4])) {
    CAT_LIT(buf, "-");
  } else {
    combined_field(buf, argv[4], 0);
    if (!NIL_P(argv[5])) {
      CAT_LIT(buf, " ");
      combined_field(buf, argv[5], 0);
    }
    if (!NIL_P(argv[6])) {
      CAT_LIT(buf, " ");
      combined_field(buf, argv[6], 0);
    }
  }
  CAT_LIT(buf, "\" ");
  append_integer(buf, argv[7]);
  CAT_LIT(buf, " ");
  append_integer(buf, argv[8]);
  CAT_LIT(buf, " ");
  combined_quoted(buf, argv[9]);
  CAT_LIT(buf, " ");
  combined_quoted(buf, argv[10]);
  CAT_LIT(buf, " ");
  append_seconds(buf, argv[11], "-", 1);
  CAT_LIT(buf, " ");
  append_seconds(buf, argv[12], "-", 1);
  CAT_LIT(buf, " ");
  combined_quoted(buf, argv[13]);
  CAT_LIT(buf, "\n");
  return buf;
}

/* Length of the UTF-8 sequence at p (at most len bytes), 0 when invalid:
 * overlong forms, surrogates and code points past U+10FFFF are invalid,
 * as Ruby's String#valid_encoding? has them. */
static long utf8_sequence(const unsigned char *p, long len)
{
  unsigned char b = p[0];
  if (b < 0x80) return 1;
  if (b >= 0xc2 && b <= 0xdf) return len >= 2 && (p[1] & 0xc0) == 0x80 ? 2 : 0;
  if (b >= 0xe0 && b <= 0xef) {
    if (len < 3 || (p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80) return 0;
    if (b == 0xe0 && p[1] < 0xa0) return 0; /* overlong */
    if (b == 0xed && p[1] > 0x9f) return 0; /* surrogate */
    return 3;
  }
  if (b >= 0xf0 && b <= 0xf4) {
    if (len < 4 || (p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80 || (p[3] & 0xc0) != 0x80) return 0;
    if (b == 0xf0 && p[1] < 0x90) return 0; /* overlong */
    if (b == 0xf4 && p[1] > 0x8f) return 0; /* past U+10FFFF */
    return 4;
  }
  return 0;
}

static int valid_utf8(const unsigned char *p, long len)
{
  long i = 0, n;
  while (i < len) {
    n = utf8_sequence(p + i, len - i);
    if (n == 0) return 0;
    i += n;
  }
  return 1;
}

static int has_high_bytes(const unsigned char *p, long len)
{
  long i;
  for (i = 0; i < len; i++)
    if (p[i] >= 0x80) return 1;
  return 0;
}

/* A JSON string's contents: the quote, the backslash and control
 * characters escaped, UTF-8 kept; the bytes of a string that is not valid
 * UTF-8 as \u00HH (JSON has no bytes), so that the line stays JSON. */
static void json_escaped(VALUE buf, VALUE str)
{
  const unsigned char *p = (const unsigned char *)RSTRING_PTR(str);
  long len = RSTRING_LEN(str), start = 0, i;
  int keep_high = !has_high_bytes(p, len) || valid_utf8(p, len);
  char u[6] = { '\\', 'u', '0', '0', 0, 0 };
  char shortform[2] = { '\\', 0 };

  for (i = 0; i < len; i++) {
    unsigned char b = p[i];
    if (b >= 0x20 && b != '"' && b != '\\' && b != 0x7f && (b < 0x80 || keep_high)) continue;
    if (i > start) cat(buf, (const char *)p + start, i - start);
    start = i + 1;
    switch (b) {
    case '"': shortform[1] = '"'; break;
    case '\\': shortform[1] = '\\'; break;
    case '\n': shortform[1] = 'n'; break;
    case '\r': shortform[1] = 'r'; break;
    case '\t': shortform[1] = 't'; break;
    default:
      u[4] = hexdigits[b >> 4];
      u[5] = hexdigits[b & 0xf];
      cat(buf, u, sizeof(u));
      continue;
    }
    cat(buf, shortform, sizeof(shortform));
  }
  if (len > start) cat(buf, (const char *)p + start, len - start);
}

/* ,"key":"value" or ,"key":null */
static void json_string(VALUE buf, const char *key, long key_len, VALUE value)
{
  VALUE str = field_string(value);
  cat(buf, key, key_len);
  if (NIL_P(str)) {
    CAT_LIT(buf, "null");
    return;
  }
  CAT_LIT(buf, "\"");
  json_escaped(buf, str);
  CAT_LIT(buf, "\"");
  RB_GC_GUARD(str);
}
#define JSON_STRING(buf, key, value) json_string((buf), (key), (long)sizeof(key) - 1, (value))

/*
 * AccessLogLine.json(buf, stamp, millis, zone, remote_addr, remote_user, method, uri,
 *           protocol, status, bytes, duration, queue_time, request_id,
 *           referer, user_agent) -> buf
 *
 * One JSON object (see AccessLog::Json). The time is stamp + "." + millis
 * (3 digits) + zone: "2026-11-23T10:00:00" ".123" "+00:00", trusted.
 */
static VALUE line_json(int argc, VALUE *argv, VALUE self)
{
  VALUE buf;
  if (argc != JSON_FIELDS) rb_error_arity(argc, JSON_FIELDS, JSON_FIELDS);
  buf = argv[0];
  StringValue(buf);

  CAT_LIT(buf, "{\"time\":\"");
  cat(buf, StringValuePtr(argv[1]), RSTRING_LEN(argv[1]));
  CAT_LIT(buf, ".");
  append_uint(buf, (unsigned long long)NUM2UINT(argv[2]) % 1000, 3);
  cat(buf, StringValuePtr(argv[3]), RSTRING_LEN(argv[3]));
  CAT_LIT(buf, "\"");
  JSON_STRING(buf, ",\"remote_addr\":", argv[4]);
  JSON_STRING(buf, ",\"remote_user\":", argv[5]);
  JSON_STRING(buf, ",\"method\":", argv[6]);
  JSON_STRING(buf, ",\"uri\":", argv[7]);
  JSON_STRING(buf, ",\"protocol\":", argv[8]);
  CAT_LIT(buf, ",\"status\":");
  append_integer(buf, argv[9]);
  CAT_LIT(buf, ",\"bytes\":");
  append_integer(buf, argv[10]);
  CAT_LIT(buf, ",\"duration\":");
  append_seconds(buf, argv[11], "null", 4);
  CAT_LIT(buf, ",\"queue_time\":");
  append_seconds(buf, argv[12], "null", 4);
  JSON_STRING(buf, ",\"request_id\":", argv[13]);
  JSON_STRING(buf, ",\"referer\":", argv[14]);
  JSON_STRING(buf, ",\"user_agent\":", argv[15]);
  CAT_LIT(buf, "}\n");
  return buf;
}

void nw_init_access_log(void)
{
  /* not under AccessLog, a class autoloaded only when a log is on */
  VALUE mLine = rb_define_module_under(nw_mNarwhal, "AccessLogLine");
  id_to_i = rb_intern("to_i");
  rb_define_module_function(mLine, "combined", line_combined, -1);
  rb_define_module_function(mLine, "json", line_json, -1);
}
