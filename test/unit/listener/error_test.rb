# frozen_string_literal: true

require "test_helper"

# Why a listen address could not be bound, in the operator's terms: the
# directory, the path's length, the process holding the port, the host.
class ListenerErrorTest < Minitest::Test
  def test_a_unix_socket_in_a_missing_directory_names_the_directory
    Dir.mktmpdir do |dir|
      path = File.join(dir, "tmp/sockets/narwhal.sock")
      e = assert_raises(Narwhal::Listener::Error) { Narwhal::Listener.new(path) }
      assert_equal "cannot listen on #{path}: directory #{dir}/tmp/sockets does not exist", e.message
    end
  end

  def test_unix_socket_path_too_long_or_not_a_socket
    Dir.mktmpdir do |dir|
      long = File.join(dir, "#{'x' * 120}.sock")
      e = assert_raises(Narwhal::Listener::Error) { Narwhal::Listener.new(long) }
      assert_equal "cannot listen on #{long}: a Unix socket path may be at most 107 bytes, this one is " \
                   "#{long.bytesize}", e.message
      plain = File.join(dir, "plain")
      File.write(plain, "data")
      e = assert_raises(Narwhal::Listener::Error) { Narwhal::Listener.new(plain) }
      assert_equal "cannot listen on #{plain}: the file exists and is not a socket (only a stale socket " \
                   "file is replaced)", e.message
      assert_equal "data", File.read(plain)
    end
  end

  def test_address_in_use_names_the_process_holding_it
    holder = TCPServer.new("127.0.0.1", 0)
    port = holder.addr[1]
    e = assert_raises(Narwhal::Listener::Error) { Narwhal::Listener.new("127.0.0.1:#{port}", tries: 0) }
    assert_match(/\Acannot listen on 127\.0\.0\.1:#{port}: address already in use by pid #{Process.pid} \(.+\)\z/,
                 e.message)
    assert_kind_of Errno::EADDRINUSE, e.cause
  ensure
    holder&.close
  end

  def test_an_unknown_host_and_an_address_not_on_this_machine
    e = assert_raises(Narwhal::Listener::Error) { Narwhal::Listener.new("nosuchhost.invalid:8080") }
    assert_equal "cannot listen on nosuchhost.invalid:8080: unknown host nosuchhost.invalid", e.message
    # TEST-NET-1 (RFC 5737) is never assigned to a machine
    e = assert_raises(Narwhal::Listener::Error) { Narwhal::Listener.new("192.0.2.1:8080") }
    assert_equal "cannot listen on 192.0.2.1:8080: 192.0.2.1 is not an address of this machine", e.message
  end

  # Where this machine draws the privileged line is its sysctl's to say.
  def test_a_privileged_port_says_what_it_needs
    first = Narwhal::Listener::Error.first_unprivileged_port
    skip "every port is unprivileged here (ip_unprivileged_port_start 0)" if first.zero?

    e = Narwhal::Listener::Error.from(Errno::EACCES.new, :tcp, ["0.0.0.0", first - 1])
    assert_equal "cannot listen on 0.0.0.0:#{first - 1}: ports below #{first} need root or CAP_NET_BIND_SERVICE",
                 e.message
    e = Narwhal::Listener::Error.from(Errno::EACCES.new, :tcp, ["0.0.0.0", first])
    assert_equal "cannot listen on 0.0.0.0:#{first}: permission denied", e.message
  end

  def test_ipv6_addresses_are_bracketed_and_the_address_is_kept
    e = Narwhal::Listener::Error.from(Errno::EADDRNOTAVAIL.new, :tcp, ["2001:db8::1", 8080])
    assert_equal "cannot listen on [2001:db8::1]:8080: 2001:db8::1 is not an address of this machine", e.message
    assert_equal "[2001:db8::1]:8080", e.address
  end

  # A resolver that could not answer (it may pass) reads differently from a
  # name that does not exist.
  def test_a_resolver_failure_is_not_an_unknown_host
    failure = SocketError.new("getaddrinfo: Temporary failure in name resolution")
    assert_equal "cannot listen on db.internal:80: cannot resolve db.internal: temporary failure in name resolution",
                 Narwhal::Listener::Error.from(failure, :tcp, ["db.internal", 80]).message
  end

  def test_a_unix_socket_in_a_directory_this_user_cannot_write
    e = Narwhal::Listener::Error.from(Errno::EACCES.new, :unix, "/srv/app/tmp/n.sock")
    assert_equal "cannot listen on /srv/app/tmp/n.sock: permission denied: this user (uid #{Process.euid}) cannot " \
                 "create files in /srv/app/tmp", e.message
  end
end
