/*
 * Strict, incremental HTTP/1.1 request parser (RFC 9112).
 *
 * This file knows nothing about Ruby: it validates bytes and reports what it
 * found through callbacks, so the same code runs in the extension, in the
 * unit tests and under the fuzzer.
 *
 * Every failure is reported as the HTTP status code the server must answer
 * with (400, 413, 414, 417, 431, 505); after a failure the connection must be
 * closed.
 */
#ifndef NARWHAL_PARSER_H
#define NARWHAL_PARSER_H

#include <stddef.h>
#include <stdint.h>

/* token characters (RFC 9110 section 5.6.2), 1 for each: field names, methods */
extern const unsigned char nw_tchar[256];

#define NW_PARSE_ERROR SIZE_MAX

/* Longest chunk-size line (size, extensions, CRLF) we buffer. */
#define NW_MAX_CHUNK_LINE 4096

enum nw_state {
  NW_S_REQUEST_LINE = 0,
  NW_S_HEADERS,
  NW_S_HEAD_DONE,    /* header section complete; body (if any) is next */
  NW_S_CHUNK_SIZE,
  NW_S_CHUNK_DATA,
  NW_S_CHUNK_DATA_CR,
  NW_S_CHUNK_DATA_LF,
  NW_S_TRAILERS,
  NW_S_BODY_DONE,
  NW_S_ERROR
};

enum nw_target_form {
  NW_FORM_ORIGIN = 0, /* /path?query */
  NW_FORM_ABSOLUTE,   /* http://host:port/path?query */
  NW_FORM_AUTHORITY,  /* host:port (CONNECT) */
  NW_FORM_ASTERISK    /* * (OPTIONS) */
};

/* Fields the parser itself interprets; everything else is NW_FIELD_OTHER. */
enum nw_field_id {
  NW_FIELD_OTHER = 0,
  NW_FIELD_HOST,
  NW_FIELD_CONTENT_LENGTH,
  NW_FIELD_CONTENT_TYPE,
  NW_FIELD_TRANSFER_ENCODING,
  NW_FIELD_CONNECTION,
  NW_FIELD_EXPECT,
  NW_FIELD_COOKIE
};

#define NW_F_HOST            (1u << 0)
#define NW_F_CONTENT_LENGTH  (1u << 1)
#define NW_F_TRANSFER_ENC    (1u << 2)
#define NW_F_CHUNKED         (1u << 3)
#define NW_F_CONN_CLOSE      (1u << 4)
#define NW_F_CONN_KEEPALIVE  (1u << 5)
#define NW_F_EXPECT_CONTINUE (1u << 6)
#define NW_F_CONTENT_TYPE    (1u << 7)

typedef struct {
  const char *ptr;
  size_t len;
} nw_span;

typedef struct {
  nw_span method;
  nw_span target;  /* the whole request-target, as sent */
  nw_span scheme;  /* absolute-form only */
  nw_span host;    /* absolute-form and authority-form */
  nw_span port;
  nw_span path;    /* empty for authority-form; empty absolute path means "/" */
  nw_span query;   /* without the '?' */
  int has_query;
  int form;        /* enum nw_target_form */
  int http_minor;  /* 0 or 1 (1.2+ is served as 1.1) */
} nw_request_line;

/* Callbacks return 0, or an HTTP status code to fail the request with. */
typedef struct {
  int (*on_request_line)(void *data, const nw_request_line *rl);
  /* Host field value, already validated and split. */
  int (*on_host)(void *data, nw_span host, nw_span port);
  /* trailer is 1 for fields from a chunked trailer section. */
  int (*on_field)(void *data, int field_id, nw_span name, nw_span value, int trailer);
  int (*on_headers_complete)(void *data);
  int (*on_body)(void *data, const char *ptr, size_t len);
} nw_callbacks;

typedef struct {
  /* limits: set before parsing, kept across nw_parser_reset */
  size_t max_request_line;   /* 414 beyond */
  size_t max_header_size;    /* 431 beyond; counts trailers too */
  unsigned max_header_fields;/* 431 beyond; counts trailers too */
  uint64_t max_body_size;    /* 413 beyond; 0 = unlimited */

  const nw_callbacks *cb;
  void *data;

  /* parse state */
  int state;
  int error;                 /* HTTP status after a failure */
  size_t scanned;            /* bytes of the pending line known to hold no LF */
  size_t request_line_bytes;
  size_t header_bytes;
  unsigned field_count;

  /* what the head said */
  int http_minor;
  int form;
  unsigned flags;
  uint64_t content_length;

  /* chunked body */
  uint64_t chunk_remaining;
  uint64_t body_received;
} nw_parser;

void nw_parser_init(nw_parser *p, const nw_callbacks *cb, void *data);
void nw_parser_reset(nw_parser *p);

/*
 * Parses the request line and header section from buf[off, len).
 * Returns the offset of the first byte not consumed (a partial line is left
 * for the next call, which must pass the same bytes again at that offset),
 * or NW_PARSE_ERROR with p->error set.
 */
size_t nw_parse_head(nw_parser *p, const char *buf, size_t len, size_t off);

/*
 * Decodes a chunked body from buf[off, len), delivering data through
 * on_body and trailer fields through on_field. Same return convention.
 */
size_t nw_parse_chunked(nw_parser *p, const char *buf, size_t len, size_t off);

int nw_keep_alive(const nw_parser *p);

#endif
