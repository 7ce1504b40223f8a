/* Shared declarations of the narwhal_http extension. */
#ifndef NARWHAL_HTTP_H
#define NARWHAL_HTTP_H

#include <ruby.h>
#include <ruby/encoding.h>
#include <sys/socket.h>

extern VALUE nw_mNarwhal;

/* Frozen, interned strings shared with Ruby code (see env_keys.c). */
extern VALUE nw_key_REQUEST_METHOD, nw_key_REQUEST_URI, nw_key_REQUEST_PATH,
    nw_key_PATH_INFO, nw_key_QUERY_STRING, nw_key_SERVER_NAME,
    nw_key_SERVER_PORT, nw_key_SERVER_PROTOCOL, nw_key_HTTP_VERSION,
    nw_key_HTTP_HOST, nw_key_CONTENT_LENGTH, nw_key_CONTENT_TYPE,
    nw_key_URL_SCHEME, nw_key_HTTP_X_REQUEST_START, nw_key_HTTP_X_QUEUE_START,
    nw_val_HTTP_1_1, nw_val_HTTP_1_0, nw_val_port_80, nw_val_port_443,
    nw_val_https, nw_val_http, nw_val_slash;

VALUE nw_fstring(const char *ptr, long len);
VALUE nw_keep_fstring(const char *s);
void nw_init_env_keys(void);
void nw_init_parser(void);
void nw_init_response(void);
void nw_init_sendfile(void);
void nw_init_free_space(void);
void nw_init_peer_address(void);
VALUE nw_sockaddr_text(const struct sockaddr_storage *ss, socklen_t len);
void nw_init_scoreboard(void);
void nw_init_poller(void);
void nw_init_access_log(void);

/* The scoreboard (scoreboard.c) and its slot objects (scoreboard_slots.c);
 * the layout is in scoreboard.h. The lookups raise IndexError. */
struct nw_sb_worker;
struct nw_sb_thread;
struct nw_sb_header;
struct nw_sb_worker *nw_scoreboard_worker(VALUE board, VALUE nr);
char *nw_scoreboard_base(VALUE board, const struct nw_sb_header **layout);
struct nw_sb_thread *nw_scoreboard_thread(VALUE board, VALUE nr, VALUE i);
VALUE nw_thread_slot_new(VALUE board, struct nw_sb_thread *slot, struct nw_sb_worker *worker);
VALUE nw_worker_slot_new(VALUE board, VALUE nr);
void nw_init_scoreboard_slots(VALUE cScoreboard);
int64_t *nw_worker_slot_waiting(VALUE worker_slot);
int nw_thread_slot_started(VALUE slot, VALUE method, VALUE path, int fd);
int nw_thread_slot_responding(VALUE slot);
int nw_thread_slot_finished(VALUE slot);

/* What the request loop (request_loop.c) uses of the parser and the
 * response head: see parser_ext.c and response.c. */
long nw_http_parser_head(VALUE parser, VALUE env, VALUE buf, long off);
int nw_http_parser_plain(VALUE parser);
int nw_http_parser_keepalive(VALUE parser);
int nw_http_parser_http11(VALUE parser);
VALUE nw_http_parser_for(VALUE limits);
VALUE nw_http_parser_method(VALUE parser);
VALUE nw_http_parser_path(VALUE parser);
void nw_http_parser_reset(VALUE parser);
/* ResponseHead#write's modes: how the body goes out after the head. */
#define MODE_DONE    0 /* the buffer holds the whole response */
#define MODE_LENGTH  1 /* send exactly content_length body bytes */
#define MODE_CHUNKED 2 /* encode the body with chunked framing */
#define MODE_RAW     3 /* the app framed the body itself (transfer-encoding) */
#define MODE_CLOSE   4 /* body ends when the connection closes */
#define MODE_HIJACK  5 /* hand the socket to the rack.hijack callable */
VALUE nw_response_head_write(VALUE head, VALUE buf, VALUE status, VALUE headers, VALUE hint, int flags);
int nw_response_head_keepalive(VALUE head);
void nw_init_request_loop(void);

/* The endpoint-load-metrics line responses carry (load_report.c). */
void nw_init_load_report(void);
int nw_load_report_p(VALUE obj);
const char *nw_load_report_line(VALUE report, long *len);

/* Arrival stamps of received bytes (arrival.c). */
void nw_init_arrival(void);
double nw_realtime(void);
int nw_arrival_enable(int fd);
double nw_arrival_since(double arrived);
ssize_t nw_recv_stamped(int fd, char *buf, size_t len, double *arrived);
int nw_thread_slot_queue_time(VALUE slot, int kind, double seconds);

/* What the master reaches in a worker at timeout (backtrace_signal.c, stranded.c). */
void nw_init_backtrace_signal(void);
struct nw_sb_thread *nw_bound_thread_slot(void);
void nw_init_stranded(void);

#endif
