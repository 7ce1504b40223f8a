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
        pid = fork { exit!(Narwhal::RequestLoop.new(nil, nil, nil, nil).accept_serve(listener.io.fileno, nil, nil).nil?) }
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
end
