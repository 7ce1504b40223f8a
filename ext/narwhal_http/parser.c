/*
 * Strict, incremental HTTP/1.1 request parser. See parser.h.
 *
 * The head is parsed a whole line at a time: a line is interpreted only once
 * its CRLF has arrived, so the result never depends on how the bytes were
 * split across reads. A bare LF (no CR before it) is rejected everywhere
 * (RFC 9112 section 2.2 allows either choice; rejecting removes any framing
 * disagreement with a proxy in front of us).
 */
#include "parser.h"
#include <string.h>

#define HTTP_BAD_REQUEST 400
#define HTTP_PAYLOAD_TOO_LARGE 413
#define HTTP_URI_TOO_LONG 414
#define HTTP_EXPECTATION_FAILED 417
#define HTTP_FIELDS_TOO_LARGE 431
#define HTTP_VERSION_NOT_SUPPORTED 505

/* "HTTP/" DIGIT "." DIGIT */
#define VERSION_LEN 8
#define VERSION_PREFIX_LEN 5
/* Longest port we accept in Host or an absolute URI. */
#define MAX_PORT_DIGITS 5
/* Sizes are kept below 2^62 so they fit a Ruby Integer and never wrap. */
#define MAX_SIZE_VALUE ((uint64_t)1 << 62)

/* token characters (RFC 9110 section 5.6.2): also a response's field names */
const unsigned char nw_tchar[256] = {
  ['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1,
  ['*'] = 1, ['+'] = 1, ['-'] = 1, ['.'] = 1, ['^'] = 1, ['_'] = 1,
  ['`'] = 1, ['|'] = 1, ['~'] = 1,
  ['0' ... '9'] = 1, ['A' ... 'Z'] = 1, ['a' ... 'z'] = 1,
};

/* field-value bytes: HTAB, SP, VCHAR, obs-text (RFC 9110 section 5.5) */
static const unsigned char vchar[256] = {
  ['\t'] = 1, [' ' ... '~'] = 1, [0x80 ... 0xff] = 1,
};

/*
 * request-target bytes: visible ASCII; bytes >= 0x80 are tolerated because
 * real clients send raw UTF-8 paths. Controls, SP and DEL are not.
 */
static const unsigned char target_char[256] = {
  ['!' ... '~'] = 1, [0x80 ... 0xff] = 1,
};

/* reg-name / IPv4 characters in Host (RFC 3986 section 3.2.2) */
static const unsigned char host_char[256] = {
  ['0' ... '9'] = 1, ['A' ... 'Z'] = 1, ['a' ... 'z'] = 1,
  ['-'] = 1, ['.'] = 1, ['_'] = 1, ['~'] = 1, ['!'] = 1, ['$'] = 1,
  ['&'] = 1, ['\''] = 1, ['('] = 1, [')'] = 1, ['*'] = 1, ['+'] = 1,
  [','] = 1, [';'] = 1, ['='] = 1, ['%'] = 1,
};

/*
 * Characters allowed inside a bracketed IP-literal: hex digits, ":" and "."
 * (IPv6, IPv4 suffix), "v" and "%". Zone identifiers with letters beyond
 * a-f (fe80::1%25eth0) and most IPvFuture forms are therefore rejected; RFC
 * 9110 has no zone identifiers in Host, and browsers never send them.
 */
static const unsigned char ip_literal_char[256] = {
  ['0' ... '9'] = 1, ['A' ... 'F'] = 1, ['a' ... 'f'] = 1, [':'] = 1,
  ['.'] = 1, ['v'] = 1, ['V'] = 1, ['%'] = 1,
};

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static int is_ows(unsigned char c) { return c == ' ' || c == '\t'; }

static unsigned char lower(unsigned char c)
{
  return (c >= 'A' && c <= 'Z') ? (unsigned char)(c + ('a' - 'A')) : c;
}

static int span_eq_nocase(const char *s, size_t n, const char *lit)
{
  size_t i;
  if (strlen(lit) != n) return 0;
  for (i = 0; i < n; i++)
    if (lower((unsigned char)s[i]) != (unsigned char)lit[i]) return 0;
  return 1;
}

static size_t fail(nw_parser *p, int status)
{
  p->state = NW_S_ERROR;
  p->error = status;
  return NW_PARSE_ERROR;
}

void nw_parser_reset(nw_parser *p)
{
  p->state = NW_S_REQUEST_LINE;
  p->error = 0;
  p->scanned = 0;
  p->request_line_bytes = 0;
  p->header_bytes = 0;
  p->field_count = 0;
  p->http_minor = 1;
  p->form = NW_FORM_ORIGIN;
  p->flags = 0;
  p->content_length = 0;
  p->chunk_remaining = 0;
  p->body_received = 0;
}

void nw_parser_init(nw_parser *p, const nw_callbacks *cb, void *data)
{
  memset(p, 0, sizeof(*p));
  p->cb = cb;
  p->data = data;
  nw_parser_reset(p);
}

int nw_keep_alive(const nw_parser *p)
{
  if (p->flags & NW_F_CONN_CLOSE) return 0;
  if (p->http_minor >= 1) return 1;
  return (p->flags & NW_F_CONN_KEEPALIVE) != 0;
}

/* Splits host[:port]; host may be an IP-literal. Empty input is allowed. */
static int split_host(const char *v, size_t n, nw_span *host, nw_span *port)
{
  size_t i, colon = n;

  host->ptr = v; host->len = 0;
  port->ptr = v + n; port->len = 0;
  if (n == 0) return 0;

  if (v[0] == '[') {
    for (i = 1; i < n && v[i] != ']'; i++)
      if (!ip_literal_char[(unsigned char)v[i]]) return HTTP_BAD_REQUEST;
    if (i >= n || i == 1) return HTTP_BAD_REQUEST;
    host->len = i + 1;
    if (host->len < n) {
      if (v[host->len] != ':') return HTTP_BAD_REQUEST;
      colon = host->len;
    }
  } else {
    for (i = 0; i < n; i++) {
      unsigned char c = (unsigned char)v[i];
      if (c == ':') { colon = i; break; }
      if (!host_char[c]) return HTTP_BAD_REQUEST;
    }
    host->len = colon;
    if (host->len == 0) return HTTP_BAD_REQUEST;
  }
  if (colon < n) {
    port->ptr = v + colon + 1;
    port->len = n - colon - 1;
    if (port->len > MAX_PORT_DIGITS) return HTTP_BAD_REQUEST;
    for (i = 0; i < port->len; i++)
      if (!is_digit((unsigned char)port->ptr[i])) return HTTP_BAD_REQUEST;
  }
  return 0;
}

/* Splits path from query; drops a fragment (clients should not send one). */
static void split_path(const char *t, size_t n, nw_request_line *rl)
{
  size_t i, end = n;
  for (i = 0; i < n; i++) if (t[i] == '#') { end = i; break; }
  rl->path.ptr = t;
  rl->path.len = end;
  for (i = 0; i < end; i++) {
    if (t[i] == '?') {
      rl->path.len = i;
      rl->query.ptr = t + i + 1;
      rl->query.len = end - i - 1;
      rl->has_query = 1;
      return;
    }
  }
  rl->query.ptr = t + end;
  rl->query.len = 0;
}

static int parse_absolute_target(const char *t, size_t n, nw_request_line *rl)
{
  size_t i = 0, start;
  int st;

  if (n == 0 || !((t[0] | 0x20) >= 'a' && (t[0] | 0x20) <= 'z'))
    return HTTP_BAD_REQUEST;
  while (i < n && t[i] != ':') i++;
  if (i + 3 > n || t[i + 1] != '/' || t[i + 2] != '/') return HTTP_BAD_REQUEST;
  if (!span_eq_nocase(t, i, "http") && !span_eq_nocase(t, i, "https"))
    return HTTP_BAD_REQUEST;
  rl->scheme.ptr = t;
  rl->scheme.len = i;
  start = i + 3;
  for (i = start; i < n && t[i] != '/' && t[i] != '?' && t[i] != '#'; i++)
    if (t[i] == '@') return HTTP_BAD_REQUEST; /* userinfo is forbidden */
  if (i == start) return HTTP_BAD_REQUEST;
  if ((st = split_host(t + start, i - start, &rl->host, &rl->port))) return st;
  split_path(t + i, n - i, rl);
  rl->form = NW_FORM_ABSOLUTE;
  return 0;
}

static int parse_request_line(nw_parser *p, const char *s, size_t n)
{
  nw_request_line rl;
  size_t i = 0, tstart;
  int major, minor, st;

  memset(&rl, 0, sizeof(rl));
  while (i < n && nw_tchar[(unsigned char)s[i]]) i++;
  if (i == 0 || i >= n || s[i] != ' ') return HTTP_BAD_REQUEST;
  rl.method.ptr = s;
  rl.method.len = i;

  tstart = ++i;
  while (i < n && s[i] != ' ') {
    if (!target_char[(unsigned char)s[i]]) return HTTP_BAD_REQUEST;
    i++;
  }
  if (i == tstart || i >= n) return HTTP_BAD_REQUEST;
  rl.target.ptr = s + tstart;
  rl.target.len = i - tstart;
  i++;

  if (n - i != VERSION_LEN || memcmp(s + i, "HTTP/", VERSION_PREFIX_LEN) != 0 ||
      !is_digit((unsigned char)s[i + 5]) || s[i + 6] != '.' ||
      !is_digit((unsigned char)s[i + 7]))
    return HTTP_BAD_REQUEST;
  major = s[i + 5] - '0';
  minor = s[i + 7] - '0';
  if (major != 1) return HTTP_VERSION_NOT_SUPPORTED;
  rl.http_minor = minor >= 1 ? 1 : 0;

  if (rl.target.ptr[0] == '/') {
    split_path(rl.target.ptr, rl.target.len, &rl);
  } else if (rl.target.len == 1 && rl.target.ptr[0] == '*') {
    if (!(rl.method.len == 7 && memcmp(rl.method.ptr, "OPTIONS", 7) == 0))
      return HTTP_BAD_REQUEST;
    rl.form = NW_FORM_ASTERISK;
    rl.path = rl.target;
  } else if (rl.method.len == 7 && memcmp(rl.method.ptr, "CONNECT", 7) == 0) {
    if ((st = split_host(rl.target.ptr, rl.target.len, &rl.host, &rl.port)))
      return st;
    if (rl.port.len == 0) return HTTP_BAD_REQUEST;
    rl.form = NW_FORM_AUTHORITY;
  } else if ((st = parse_absolute_target(rl.target.ptr, rl.target.len, &rl))) {
    return st;
  }

  p->http_minor = rl.http_minor;
  p->form = rl.form;
  return p->cb->on_request_line ? p->cb->on_request_line(p->data, &rl) : 0;
}

static int classify_field(const char *name, size_t n)
{
  switch (n) {
  case 4: if (span_eq_nocase(name, n, "host")) return NW_FIELD_HOST; break;
  case 6:
    if (span_eq_nocase(name, n, "cookie")) return NW_FIELD_COOKIE;
    if (span_eq_nocase(name, n, "expect")) return NW_FIELD_EXPECT;
    break;
  case 10: if (span_eq_nocase(name, n, "connection")) return NW_FIELD_CONNECTION; break;
  case 12: if (span_eq_nocase(name, n, "content-type")) return NW_FIELD_CONTENT_TYPE; break;
  case 14: if (span_eq_nocase(name, n, "content-length")) return NW_FIELD_CONTENT_LENGTH; break;
  case 17: if (span_eq_nocase(name, n, "transfer-encoding")) return NW_FIELD_TRANSFER_ENCODING; break;
  }
  return NW_FIELD_OTHER;
}

/* 1*DIGIT, nothing else: no sign, no spaces, no list, no overflow. */
static int parse_decimal(const char *v, size_t n, uint64_t *out)
{
  uint64_t x = 0;
  size_t i;
  if (n == 0) return HTTP_BAD_REQUEST;
  for (i = 0; i < n; i++) {
    unsigned char c = (unsigned char)v[i];
    if (!is_digit(c)) return HTTP_BAD_REQUEST;
    /* checked before multiplying, so a long digit run can never wrap */
    if (x > (MAX_SIZE_VALUE - 1 - (uint64_t)(c - '0')) / 10) return HTTP_BAD_REQUEST;
    x = x * 10 + (uint64_t)(c - '0');
  }
  *out = x;
  return 0;
}

/*
 * Calls fn for each non-empty element of a comma-separated list (RFC 9110
 * section 5.6.1), OWS trimmed.
 */
typedef int (*list_fn)(nw_parser *p, const char *el, size_t n);

static int each_list_element(nw_parser *p, const char *v, size_t n, list_fn fn)
{
  size_t i = 0;
  while (i < n) {
    size_t start, end;
    int st;
    while (i < n && (is_ows((unsigned char)v[i]) || v[i] == ',')) i++;
    start = i;
    while (i < n && v[i] != ',') i++;
    end = i;
    while (end > start && is_ows((unsigned char)v[end - 1])) end--;
    if (end > start && (st = fn(p, v + start, end - start))) return st;
  }
  return 0;
}

/* Only "chunked", exactly once, is accepted as a transfer coding. */
static int transfer_coding(nw_parser *p, const char *el, size_t n)
{
  if (!span_eq_nocase(el, n, "chunked")) return HTTP_BAD_REQUEST;
  if (p->flags & NW_F_CHUNKED) return HTTP_BAD_REQUEST;
  p->flags |= NW_F_CHUNKED;
  return 0;
}

static int connection_option(nw_parser *p, const char *el, size_t n)
{
  if (span_eq_nocase(el, n, "close")) p->flags |= NW_F_CONN_CLOSE;
  else if (span_eq_nocase(el, n, "keep-alive")) p->flags |= NW_F_CONN_KEEPALIVE;
  return 0;
}

/* Field names that must not be taken from a chunked trailer section. */
static int forbidden_trailer(const char *name, size_t n)
{
  static const char *const names[] = {
    "host", "content-length", "content-type", "content-encoding",
    "content-range", "transfer-encoding", "connection", "keep-alive",
    "te", "trailer", "upgrade", "expect", "authorization",
    "proxy-authorization", "cookie", "set-cookie", "range", "max-forwards",
    "cache-control", "pragma", "if-match", "if-none-match",
    "if-modified-since", "if-unmodified-since", "if-range", NULL
  };
  const char *const *q;
  for (q = names; *q; q++) if (span_eq_nocase(name, n, *q)) return 1;
  return 0;
}

static int parse_field(nw_parser *p, const char *s, size_t n, int trailer)
{
  size_t i = 0, vend;
  nw_span name, value;
  int id, st;
  uint64_t len;

  while (i < n && nw_tchar[(unsigned char)s[i]]) i++;
  /* i == 0 also catches obs-fold (a line starting with SP or HTAB) */
  if (i == 0 || i >= n || s[i] != ':') return HTTP_BAD_REQUEST;
  name.ptr = s;
  name.len = i;
  i++;
  while (i < n && is_ows((unsigned char)s[i])) i++;
  vend = n;
  while (vend > i && is_ows((unsigned char)s[vend - 1])) vend--;
  value.ptr = s + i;
  value.len = vend - i;
  for (; i < vend; i++)
    if (!vchar[(unsigned char)s[i]]) return HTTP_BAD_REQUEST;

  if (trailer) {
    if (forbidden_trailer(name.ptr, name.len)) return 0;
    return p->cb->on_field ? p->cb->on_field(p->data, NW_FIELD_OTHER, name, value, 1) : 0;
  }

  id = classify_field(name.ptr, name.len);
  switch (id) {
  case NW_FIELD_HOST: {
    nw_span host, port;
    if (p->flags & NW_F_HOST) return HTTP_BAD_REQUEST;
    p->flags |= NW_F_HOST;
    if ((st = split_host(value.ptr, value.len, &host, &port))) return st;
    /* an absolute-form target overrides Host (RFC 9112 section 3.2.2) */
    if (p->form == NW_FORM_ABSOLUTE) return 0;
    if (p->cb->on_host && (st = p->cb->on_host(p->data, host, port))) return st;
    break;
  }
  case NW_FIELD_CONTENT_LENGTH:
    if ((st = parse_decimal(value.ptr, value.len, &len))) return st;
    if (p->flags & NW_F_CONTENT_LENGTH) {
      if (len != p->content_length) return HTTP_BAD_REQUEST;
      return 0; /* identical repeat: keep one */
    }
    p->flags |= NW_F_CONTENT_LENGTH;
    p->content_length = len;
    break;
  case NW_FIELD_CONTENT_TYPE:
    if (p->flags & NW_F_CONTENT_TYPE) return HTTP_BAD_REQUEST;
    p->flags |= NW_F_CONTENT_TYPE;
    break;
  case NW_FIELD_TRANSFER_ENCODING:
    p->flags |= NW_F_TRANSFER_ENC;
    if ((st = each_list_element(p, value.ptr, value.len, transfer_coding))) return st;
    break;
  case NW_FIELD_CONNECTION:
    each_list_element(p, value.ptr, value.len, connection_option);
    break;
  case NW_FIELD_EXPECT:
    if (!span_eq_nocase(value.ptr, value.len, "100-continue"))
      return HTTP_EXPECTATION_FAILED;
    p->flags |= NW_F_EXPECT_CONTINUE;
    break;
  default:
    break;
  }
  return p->cb->on_field ? p->cb->on_field(p->data, id, name, value, 0) : 0;
}

static int finish_head(nw_parser *p)
{
  if (p->http_minor >= 1 && !(p->flags & NW_F_HOST)) return HTTP_BAD_REQUEST;
  if (p->flags & NW_F_TRANSFER_ENC) {
    /* RFC 9112 section 6.1: TE in 1.0 and TE with Content-Length are faulty */
    if (p->http_minor == 0) return HTTP_BAD_REQUEST;
    if (p->flags & NW_F_CONTENT_LENGTH) return HTTP_BAD_REQUEST;
    if (!(p->flags & NW_F_CHUNKED)) return HTTP_BAD_REQUEST;
  }
  if ((p->flags & NW_F_CONTENT_LENGTH) && p->max_body_size &&
      p->content_length > p->max_body_size)
    return HTTP_PAYLOAD_TOO_LARGE;
  return p->cb->on_headers_complete ? p->cb->on_headers_complete(p->data) : 0;
}

/*
 * Finds the next complete line at off. Returns its length without CRLF and
 * sets *total to the bytes it occupies, or returns NO_LINE when the line is
 * incomplete (p->scanned remembers how far we looked). A line whose LF has
 * no CR before it returns BARE_LF; *total is still set, so that size limits
 * are applied before the framing error, whatever way the bytes arrived.
 */
#define NO_LINE SIZE_MAX
#define BARE_LF (SIZE_MAX - 1)
static size_t next_line(nw_parser *p, const char *buf, size_t len, size_t off, size_t *total)
{
  size_t from = off + p->scanned, line;
  const char *lf = from < len ? memchr(buf + from, '\n', len - from) : NULL;
  if (!lf) {
    p->scanned = len - off;
    return NO_LINE;
  }
  p->scanned = 0;
  line = (size_t)(lf - (buf + off));
  *total = line + 1;
  if (line == 0 || buf[off + line - 1] != '\r') return BARE_LF;
  return line - 1;
}

size_t nw_parse_head(nw_parser *p, const char *buf, size_t len, size_t off)
{
  while (p->state == NW_S_REQUEST_LINE || p->state == NW_S_HEADERS) {
    size_t total, n = next_line(p, buf, len, off, &total);
    int st;

    if (n == NO_LINE) {
      if (p->state == NW_S_REQUEST_LINE) {
        if (p->request_line_bytes + p->scanned > p->max_request_line)
          return fail(p, HTTP_URI_TOO_LONG);
      } else if (p->header_bytes + p->scanned > p->max_header_size) {
        return fail(p, HTTP_FIELDS_TOO_LARGE);
      }
      return off;
    }
    if (p->state == NW_S_REQUEST_LINE) {
      p->request_line_bytes += total;
      if (p->request_line_bytes > p->max_request_line)
        return fail(p, HTTP_URI_TOO_LONG);
      if (n == BARE_LF) return fail(p, HTTP_BAD_REQUEST);
      /* empty lines before a request line are ignored (RFC 9112 section 2.2) */
      if (n > 0) {
        if ((st = parse_request_line(p, buf + off, n))) return fail(p, st);
        p->state = NW_S_HEADERS;
      }
    } else {
      p->header_bytes += total;
      if (p->header_bytes > p->max_header_size) return fail(p, HTTP_FIELDS_TOO_LARGE);
      if (n == BARE_LF) return fail(p, HTTP_BAD_REQUEST);
      if (n == 0) {
        if ((st = finish_head(p))) return fail(p, st);
        p->state = (p->flags & NW_F_CHUNKED) ? NW_S_CHUNK_SIZE : NW_S_HEAD_DONE;
        return off + total;
      }
      if (++p->field_count > p->max_header_fields) return fail(p, HTTP_FIELDS_TOO_LARGE);
      if ((st = parse_field(p, buf + off, n, 0))) return fail(p, st);
    }
    off += total;
  }
  return off;
}

static int hex_value(unsigned char c)
{
  if (c >= '0' && c <= '9') return c - '0';
  c = lower(c);
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

static size_t skip_ows(const char *s, size_t i, size_t n)
{
  while (i < n && is_ows((unsigned char)s[i])) i++;
  return i;
}

/* quoted-string starting at s[i] == '"'; returns the index after it or 0 */
static size_t quoted_string_end(const char *s, size_t i, size_t n)
{
  for (i++; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"') return i + 1;
    if (c == '\\') {
      if (++i >= n || !vchar[(unsigned char)s[i]]) return 0;
    } else if (!vchar[c]) {
      return 0;
    }
  }
  return 0;
}

/* chunk-size [ chunk-ext ] per RFC 9112 section 7.1 */
static int parse_chunk_size_line(const char *s, size_t n, uint64_t *size)
{
  uint64_t x = 0;
  size_t i = 0;
  int d;

  while (i < n && (d = hex_value((unsigned char)s[i])) >= 0) {
    if (x >= (MAX_SIZE_VALUE >> 4)) return HTTP_BAD_REQUEST;
    x = (x << 4) | (uint64_t)d;
    i++;
  }
  if (i == 0) return HTTP_BAD_REQUEST;
  *size = x;

  while (i < n) {
    size_t j = skip_ows(s, i, n);
    if (j >= n || s[j] != ';') return HTTP_BAD_REQUEST;
    i = skip_ows(s, j + 1, n);
    j = i;
    while (i < n && nw_tchar[(unsigned char)s[i]]) i++;
    if (i == j) return HTTP_BAD_REQUEST;
    j = skip_ows(s, i, n);
    if (j < n && s[j] == '=') {
      i = skip_ows(s, j + 1, n);
      if (i < n && s[i] == '"') {
        if (!(i = quoted_string_end(s, i, n))) return HTTP_BAD_REQUEST;
      } else {
        j = i;
        while (i < n && nw_tchar[(unsigned char)s[i]]) i++;
        if (i == j) return HTTP_BAD_REQUEST;
      }
    }
  }
  return 0;
}

size_t nw_parse_chunked(nw_parser *p, const char *buf, size_t len, size_t off)
{
  for (;;) {
    switch (p->state) {
    case NW_S_CHUNK_SIZE:
    case NW_S_TRAILERS: {
      size_t total, n = next_line(p, buf, len, off, &total);
      int st;
      if (n == NO_LINE) {
        if (p->state == NW_S_CHUNK_SIZE && p->scanned > NW_MAX_CHUNK_LINE)
          return fail(p, HTTP_BAD_REQUEST);
        if (p->state == NW_S_TRAILERS && p->header_bytes + p->scanned > p->max_header_size)
          return fail(p, HTTP_FIELDS_TOO_LARGE);
        return off;
      }
      if (p->state == NW_S_CHUNK_SIZE) {
        if (total > NW_MAX_CHUNK_LINE || n == BARE_LF) return fail(p, HTTP_BAD_REQUEST);
        if ((st = parse_chunk_size_line(buf + off, n, &p->chunk_remaining)))
          return fail(p, st);
        if (p->max_body_size &&
            p->body_received + p->chunk_remaining > p->max_body_size)
          return fail(p, HTTP_PAYLOAD_TOO_LARGE);
        p->state = p->chunk_remaining ? NW_S_CHUNK_DATA : NW_S_TRAILERS;
      } else {
        p->header_bytes += total;
        if (p->header_bytes > p->max_header_size) return fail(p, HTTP_FIELDS_TOO_LARGE);
        if (n == BARE_LF) return fail(p, HTTP_BAD_REQUEST);
        if (n == 0) {
          p->state = NW_S_BODY_DONE;
          return off + total;
        }
        if (++p->field_count > p->max_header_fields) return fail(p, HTTP_FIELDS_TOO_LARGE);
        if ((st = parse_field(p, buf + off, n, 1))) return fail(p, st);
      }
      off += total;
      break;
    }
    case NW_S_CHUNK_DATA: {
      size_t avail = len - off, n;
      int st;
      if (avail == 0) return off;
      n = p->chunk_remaining < avail ? (size_t)p->chunk_remaining : avail;
      if (p->cb->on_body && (st = p->cb->on_body(p->data, buf + off, n)))
        return fail(p, st);
      off += n;
      p->chunk_remaining -= n;
      p->body_received += n;
      if (p->chunk_remaining == 0) p->state = NW_S_CHUNK_DATA_CR;
      break;
    }
    case NW_S_CHUNK_DATA_CR:
      if (off >= len) return off;
      if (buf[off++] != '\r') return fail(p, HTTP_BAD_REQUEST);
      p->state = NW_S_CHUNK_DATA_LF;
      break;
    case NW_S_CHUNK_DATA_LF:
      if (off >= len) return off;
      if (buf[off++] != '\n') return fail(p, HTTP_BAD_REQUEST);
      p->state = NW_S_CHUNK_SIZE;
      break;
    case NW_S_ERROR:
      return NW_PARSE_ERROR;
    default:
      return off;
    }
  }
}
