/*
 * The address of a connection's client, for REMOTE_ADDR: Ruby's way
 * (getpeername, then Socket.unpack_sockaddr_in, which goes through
 * getnameinfo(3) and printf) costs about 4,000 instructions and three
 * objects per connection; this formats the address itself.
 */
#include "narwhal_http.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

/* "255.255.255.255" and its terminator */
#define IPV4_TEXT_MAX 16

/* Writes one byte's decimal digits at p; returns the end. */
static char *put_octet(char *p, unsigned int v)
{
  if (v >= 100) *p++ = (char)('0' + v / 100);
  if (v >= 10) *p++ = (char)('0' + v / 10 % 10);
  *p++ = (char)('0' + v % 10);
  return p;
}

static VALUE ipv4_text(const struct in_addr *addr)
{
  const unsigned char *b = (const unsigned char *)&addr->s_addr;
  char text[IPV4_TEXT_MAX], *p = text;
  int i;
  for (i = 0; i < 4; i++) {
    if (i > 0) *p++ = '.';
    p = put_octet(p, b[i]);
  }
  return rb_str_new(text, p - text);
}

/*
 * Narwhal.peer_address(fd) -> String or nil
 *
 * The client's IP address as text ("192.0.2.1", "2001:db8::1",
 * "::ffff:192.0.2.1"), as Socket.unpack_sockaddr_in would give it; nil
 * when the socket is not TCP, has no peer (any more), or the address has
 * a scope (a link-local one's "%interface": Ruby's way names it).
 */
static VALUE nw_peer_address(VALUE self, VALUE vfd)
{
  struct sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  char text[INET6_ADDRSTRLEN];

  if (getpeername(NUM2INT(vfd), (struct sockaddr *)&ss, &len) != 0) return Qnil;
  if (ss.ss_family == AF_INET) return ipv4_text(&((struct sockaddr_in *)&ss)->sin_addr);
  if (ss.ss_family == AF_INET6 && ((struct sockaddr_in6 *)&ss)->sin6_scope_id == 0 &&
      inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, text, sizeof(text)) != NULL)
    return rb_str_new_cstr(text);
  return Qnil;
}

void nw_init_peer_address(void)
{
  rb_define_module_function(nw_mNarwhal, "peer_address", nw_peer_address, 1);
}
