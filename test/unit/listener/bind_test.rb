# frozen_string_literal: true

require "test_helper"

# Binding a listener's socket: Unicorn's TCP options as the kernel reports
# them, Unix socket modes, stale socket files, and EADDRINUSE tried again.
class ListenerBindTest < Minitest::Test
  def test_stale_unix_socket_is_replaced_and_live_one_refused
    Dir.mktmpdir do |dir|
      path = File.join(dir, "s.sock")
      UNIXServer.new(path).close # leaves a stale socket file behind
      listener = Narwhal::Listener.new(path)
      assert File.socket?(path)
      e = assert_raises(Narwhal::Listener::Error) { Narwhal::Listener.new(path, tries: 0) }
      assert_match(/\Acannot listen on #{Regexp.escape(path)}: already in use by pid #{Process.pid} /, e.message)
      listener.close
      refute File.exist?(path)
    end
  end

  def int_opt(listener, level, name)
    listener.io.getsockopt(level, name).int
  end

  def test_unicorn_socket_options_are_applied
    listener = Narwhal::Listener.new("127.0.0.1:0", rcvbuf: 65_536, sndbuf: 65_536, tcp_nopush: true, reuseport: true)
    io = listener
    # Linux doubles the requested buffer sizes for bookkeeping
    assert_operator int_opt(io, Socket::SOL_SOCKET, Socket::SO_RCVBUF), :>=, 65_536
    assert_operator int_opt(io, Socket::SOL_SOCKET, Socket::SO_SNDBUF), :>=, 65_536
    assert_equal 1, int_opt(io, Socket::IPPROTO_TCP, Socket::TCP_NODELAY)
    # tcp_nopush is accepted but not applied: a cork inherited by kept-alive
    # connections would hold each response's last packet for 200 ms
    assert_equal 0, int_opt(io, Socket::IPPROTO_TCP, Socket::TCP_CORK)
    assert_equal 1, int_opt(io, Socket::SOL_SOCKET, Socket::SO_REUSEPORT)
  ensure
    listener&.close
  end

  def test_tcp_nodelay_can_be_turned_off
    listener = Narwhal::Listener.new("127.0.0.1:0", tcp_nodelay: false)
    assert_equal 0, int_opt(listener, Socket::IPPROTO_TCP, Socket::TCP_NODELAY)
  ensure
    listener&.close
  end

  def test_reuseport_lets_two_listeners_share_a_port
    first = Narwhal::Listener.new("127.0.0.1:0", reuseport: true)
    second = Narwhal::Listener.new(first.address, reuseport: true, tries: 0)
    assert_equal first.address, second.address
  ensure
    first&.close
    second&.close
  end

  def test_a_busy_port_fails_after_tries
    first = Narwhal::Listener.new("127.0.0.1:0")
    e = assert_raises(Narwhal::Listener::Error) { Narwhal::Listener.new(first.address, tries: 1, delay: 0.01) }
    assert_match(/address already in use/, e.message)
  ensure
    first&.close
  end

  def test_ipv6only_and_ipv6_addresses
    listener = Narwhal::Listener.new("[::1]:0", ipv6only: true)
    assert_match(/\A\[::1\]:\d+\z/, listener.address)
    assert_equal 1, int_opt(listener, Socket::IPPROTO_IPV6, Socket::IPV6_V6ONLY)
  rescue Errno::EADDRNOTAVAIL, Errno::EAFNOSUPPORT
    skip "this machine has no IPv6 loopback (reported as a skip, not a pass)"
  ensure
    listener&.close
  end

  def test_umask_sets_the_unix_socket_file_mode
    Dir.mktmpdir do |dir|
      path = File.join(dir, "u.sock")
      listener = Narwhal::Listener.new(path, umask: 0o077)
      assert_equal 0o700, File.stat(path).mode & 0o777
      listener.close
    end
  end

  # The control listener's mode: at most these bits, whatever the umask,
  # and the process's umask untouched.
  def test_mode_makes_a_private_unix_socket_whatever_the_umask
    Dir.mktmpdir do |dir|
      path = File.join(dir, "c.sock")
      old = File.umask(0)
      listener = Narwhal::Listener.new(path, mode: 0o600)
      assert_equal 0, File.umask
      assert_equal 0o600, File.stat(path).mode & 0o777
      UNIXSocket.new(path).close
      listener.close
    ensure
      File.umask(old)
    end
  end

  def test_tcp_defer_accept
    listener = Narwhal::Listener.new("127.0.0.1:0", tcp_defer_accept: 2, accept_filter: "httpready")
    assert_operator int_opt(listener, Socket::IPPROTO_TCP, Socket::TCP_DEFER_ACCEPT), :>=, 1
  ensure
    listener&.close
  end

  def defer_accept_of(options)
    listener = Narwhal::Listener.new("127.0.0.1:0", options)
    int_opt(listener, Socket::IPPROTO_TCP, Socket::TCP_DEFER_ACCEPT)
  ensure
    listener&.close
  end

  # The kernel reports the seconds rounded up to its SYN-ACK retransmits
  # (1 s: 1, 2 s: 3).
  def test_tcp_defer_accept_is_on_for_one_second_by_default_and_can_be_turned_off
    assert_equal 1, defer_accept_of({})
    assert_equal 1, defer_accept_of(tcp_defer_accept: true)
    assert_equal 0, defer_accept_of(tcp_defer_accept: false)
    assert_equal 0, defer_accept_of(tcp_defer_accept: nil)
    assert_equal 0, defer_accept_of(tcp_defer_accept: 0)
  end

  # Each failed attempt is logged; the port is taken as soon as it is free
  # (the holder lets go when the first retry is logged: no thread, no
  # timing).
  def test_a_busy_port_is_tried_again_and_taken_once_free
    holder = Narwhal::Listener.new("127.0.0.1:0")
    lines = []
    logger = Object.new
    logger.define_singleton_method(:error) do |line|
      lines << line
      holder.close
    end
    listener = Narwhal::Listener.new(holder.address, { tries: -1, delay: 0.01 }, logger)
    assert_equal holder.address, listener.address
    assert_equal ["#{holder.address} in use, retrying in 0.01s (attempt 1)"], lines
  ensure
    holder&.close
    listener&.close
  end
end
