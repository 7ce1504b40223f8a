/*
 * The address of a connection's client, for REMOTE_ADDR: Ruby's way
 * (getpeername, then Socket.unpack_sockaddr_in, which goes through
 * getnameinfo(3) and printf) costs about 4,000 instructions and three
 * objects per connection; this formats the address itself, also for
 * the RequestLoop, which has it from accept(2).
 */
#include "narwhal_http.h"
#include <arpa/inet.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
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

/* "%" and an interface's name (IF_NAMESIZE counts its terminator) */
#define SCOPE_TEXT_MAX (1 + IF_NAMESIZE)

/* A link-local address names its interface, as getnameinfo(3) does:
 * "fe80::1%eth0" (the interface's number if it has no name any more). */
static VALUE ipv6_text(const struct sockaddr_in6 *sa)
{
  char text[INET6_ADDRSTRLEN + SCOPE_TEXT_MAX], name[IF_NAMESIZE];
  size_t len;

  if (inet_ntop(AF_INET6, &sa->sin6_addr, text, INET6_ADDRSTRLEN) == NULL) return Qnil;
  if (sa->sin6_scope_id != 0) {
    len = strlen(text);
    if (if_indextoname(sa->sin6_scope_id, name) != NULL)
      snprintf(text + len, sizeof(text) - len, "%%%s", name);
    else
      snprintf(text + len, sizeof(text) - len, "%%%u", (unsigned int)sa->sin6_scope_id);
  }
  return rb_str_new_cstr(text);
}

/* The address as text, or nil when it is not an IP one (a Unix socket's). */
VALUE nw_sockaddr_text(const struct sockaddr_storage *ss, socklen_t len)
{
  if (ss->ss_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in))
    return ipv4_text(&((const struct sockaddr_in *)ss)->sin_addr);
  if (ss->ss_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6))
    return ipv6_text((const struct sockaddr_in6 *)ss);
  return Qnil;
}

/*
 * Narwhal.peer_address(fd) -> String or nil
 *
 * The client's IP address as text ("192.0.2.1", "2001:db8::1",
 * "::ffff:192.0.2.1", "fe80::1%eth0"), as Socket.unpack_sockaddr_in would
 * give it; nil when the socket is not TCP or has no peer (any more).
 */
static VALUE nw_peer_address(VALUE self, VALUE vfd)
{
  struct sockaddr_storage ss;
  socklen_t len = sizeof(ss);

  if (getpeername(NUM2INT(vfd), (struct sockaddr *)&ss, &len) != 0) return Qnil;
  return nw_sockaddr_text(&ss, len);
}

void nw_init_peer_address(void)
{
  rb_define_module_function(nw_mNarwhal, "peer_address", nw_peer_address, 1);
}
