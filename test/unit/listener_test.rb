# frozen_string_literal: true

require "test_helper"
require "io/nonblock"

class ListenerTest < Minitest::Test
  def test_parse_addresses
    assert_equal [:tcp, "127.0.0.1", 80], Narwhal::Listener.parse("127.0.0.1:80")
    assert_equal [:tcp, "0.0.0.0", 8080], Narwhal::Listener.parse(":8080")
    assert_equal [:tcp, "0.0.0.0", 8080], Narwhal::Listener.parse("8080")
    assert_equal [:tcp, "::1", 9000], Narwhal::Listener.parse("[::1]:9000")
    assert_equal [:tcp, "localhost", 3000], Narwhal::Listener.parse("localhost:3000")
    assert_equal [:unix, "/tmp/a.sock"], Narwhal::Listener.parse("/tmp/a.sock")
    assert_equal [:unix, "/tmp/a.sock"], Narwhal::Listener.parse("unix:/tmp/a.sock")
    assert_raises(ArgumentError) { Narwhal::Listener.parse("nope:") }
  end

  def test_an_invalid_address_lists_the_accepted_forms
    e = assert_raises(ArgumentError) { Narwhal::Listener.parse("nope:") }
    assert_equal 'invalid listen address "nope:" (use host:port, :port, port, [::1]:port, /path/to.sock, ' \
                 "./path/to.sock or unix:/path)", e.message
    # the kernel would silently take 99999 modulo 65536
    e = assert_raises(ArgumentError) { Narwhal::Listener.parse("127.0.0.1:99999") }
    assert_equal 'invalid listen address "127.0.0.1:99999": port above 65535', e.message
    assert_equal [:tcp, "127.0.0.1", 65_535], Narwhal::Listener.parse("127.0.0.1:65535")
  end

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

  def test_tcp_port_zero_reports_bound_port
    listener = Narwhal::Listener.new("127.0.0.1:0")
    assert_match(/\A127\.0\.0\.1:\d+\z/, listener.address)
    refute_equal "0", listener.env_defaults["SERVER_PORT"]
  ensure
    listener&.close
  end

  # REMOTE_ADDR is the client's address in the text Ruby's Socket gives
  # it, whatever its octets (the whole of 127.0.0.0/8 is loopback).
  def test_remote_addr_is_the_clients_address
    listener = Narwhal::Listener.new("127.0.0.1:0")
    %w[127.0.0.1 127.10.200.255 127.255.0.9 127.1.99.100].each do |from|
      assert_equal from, remote_addr_from(listener, from)
    end
  ensure
    listener&.close
  end

  def test_remote_addr_of_ipv6_and_ipv4_mapped_clients
    listener = Narwhal::Listener.new("[::]:0")
    assert_equal "::1", remote_addr_from(listener, "::1", "::1")
    assert_equal "::ffff:127.0.0.3", remote_addr_from(listener, "127.0.0.3", "127.0.0.1")
  rescue Errno::EADDRNOTAVAIL, Errno::EAFNOSUPPORT
    skip "this machine has no IPv6 loopback (reported as a skip, not a pass)"
  ensure
    listener&.close
  end

  def test_remote_addr_of_a_unix_socket_client
    path = File.join(Dir.mktmpdir, "n.sock")
    listener = Narwhal::Listener.new(path)
    client = UNIXSocket.new(path)
    assert_equal Narwhal::Listener::UNIX_REMOTE_ADDR, listener.remote_addr(listener.io.accept)
  ensure
    client&.close
    listener&.close
  end

  def remote_addr_from(listener, from, to = "127.0.0.1")
    client = Socket.tcp(to, listener.io.local_address.ip_port, from)
    client.write("G") # deferred accept: the connection is queued once a byte came
    sock = listener.io.accept
    listener.remote_addr(sock)
  ensure
    client&.close
    sock&.close
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

  def test_inherit_wraps_tcp_and_unix_listeners_and_matches_their_configured_address
    Dir.mktmpdir do |dir|
      tcp = TCPServer.new("127.0.0.1", 0)
      unix = UNIXServer.new(File.join(dir, "i.sock"))
      [tcp, unix].each { |io| io.autoclose = false } # each descriptor gets one owner: the listener
      a = Narwhal::Listener.inherit(tcp.fileno)
      b = Narwhal::Listener.inherit(unix.fileno)
      assert_equal Narwhal::Listener.expand_addr("127.0.0.1:#{tcp.addr[1]}"), a.address
      assert_equal Narwhal::Listener.expand_addr(File.join(dir, "i.sock")), b.address
      assert b.unix?
      refute a.unix?
    end
  end

  # An inherited descriptor arrives without close-on-exec (it came through
  # an exec); programs a worker runs must not get the listening socket.
  def test_inherited_listeners_are_closed_on_exec
    tcp = TCPServer.new("127.0.0.1", 0)
    tcp.close_on_exec = false
    tcp.autoclose = false # the listener owns the descriptor now: one close, by it
    listener = Narwhal::Listener.inherit(tcp.fileno)
    out = IO.popen(["sh", "-c", "ls /proc/self/fd"], &:read).split.map(&:to_i)
    refute_includes out, tcp.fileno, "the exec'd program holds the inherited listener"
    assert listener.io.close_on_exec?
  ensure
    listener&.io&.close
  end

  # systemd hands over a socket in blocking mode. The request loop accepts
  # with accept4(2) on the listener as it is: in blocking mode a worker
  # woken with a sibling for one connection would wait in accept, deaf to
  # its signals, until the next one came.
  def test_inherited_listeners_never_block_an_accept
    Dir.mktmpdir do |dir|
      [TCPServer.new("127.0.0.1", 0), UNIXServer.new(File.join(dir, "b.sock"))].each do |io|
        io.nonblock = false
        io.autoclose = false # the listener owns the descriptor now: one close, by it
        listener = Narwhal::Listener.inherit(io.fileno)
        assert listener.io.nonblock?, "#{listener.address} is non-blocking"
        pid = fork { exit!(Narwhal::RequestLoop.new(nil, nil, nil, nil).accept_serve(listener.io.fileno, nil, nil, 1).nil?) }
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 5
        sleep 0.01 until (done = Process.wait(pid, Process::WNOHANG)) || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
        Process.kill(:KILL, pid) && Process.wait(pid) unless done
        assert done && $?.success?, "an accept with nothing waiting on #{listener.address} returns at once"
        listener.io.close
      end
    end
  end

  def test_expand_addr_canonical_forms
    assert_equal "0.0.0.0:8080", Narwhal::Listener.expand_addr(":8080")
    assert_equal "0.0.0.0:8080", Narwhal::Listener.expand_addr("8080")
    assert_equal "127.0.0.1:80", Narwhal::Listener.expand_addr("localhost:80")
    assert_equal "[::1]:80", Narwhal::Listener.expand_addr("[::1]:80")
    assert_equal File.expand_path("x.sock"), Narwhal::Listener.expand_addr("unix:x.sock")
  end

  def test_option_problems_are_reported
    assert_nil Narwhal::Listener.option_problem(backlog: 10, tries: -1, delay: 0.1, tcp_nopush: false)
    assert_match(/backlog/, Narwhal::Listener.option_problem(backlog: 0))
    assert_match(/tries/, Narwhal::Listener.option_problem(tries: -2))
    assert_match(/reuseport/, Narwhal::Listener.option_problem(reuseport: "yes"))
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
end
