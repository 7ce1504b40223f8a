# frozen_string_literal: true

require "test_helper"
require "socket"
require "support/kernel_stamps"

# Arrival: the kernel's receive stamp of a connection's bytes, passed on
# from a TCP listener to what it accepts; none on Unix sockets.
class ArrivalTest < Minitest::Test
  # The first socket that asks for stamps turns them on for the whole
  # kernel, a moment later (a deferred switch): bytes that arrive before
  # get none. Waits until a stamped pair's bytes come with one.
  include Narwhal::KernelStamps

  def setup
    wait_for_kernel_stamps
  end

  def tcp_pair(stamped: true)
    listener = TCPServer.new("127.0.0.1", 0)
    assert Narwhal::Arrival.enable(listener.fileno) if stamped
    client = TCPSocket.new("127.0.0.1", listener.addr[1])
    [listener.accept, client, listener]
  end

  def realtime
    Process.clock_gettime(Process::CLOCK_REALTIME)
  end

  def test_an_accepted_connections_bytes_come_with_when_they_arrived
    server, client, listener = tcp_pair
    sent = realtime
    client.write("GET / HTTP/1.1\r\n\r\n")
    buf = +"old".b
    wait_until { IO.select([server], nil, nil, 0) }
    arrived = Narwhal::Arrival.recv(server.fileno, buf, 64)
    assert_equal "GET / HTTP/1.1\r\n\r\n", buf
    assert_in_delta sent, arrived, 0.05
    assert_operator arrived, :<=, realtime
  ensure
    [server, client, listener].each { |io| io&.close }
  end

  def test_the_stamp_is_the_arrival_not_the_read
    server, client, listener = tcp_pair
    client.write("x")
    wait_until { IO.select([server], nil, nil, 0) }
    sleep 0.2 # the bytes wait in the socket: the wait under measure
    arrived = Narwhal::Arrival.recv(server.fileno, +"", 64)
    assert_in_delta 0.2, realtime - arrived, 0.05
  ensure
    [server, client, listener].each { |io| io&.close }
  end

  def test_nothing_to_read_end_of_stream_and_no_stamp
    server, client, listener = tcp_pair(stamped: false)
    assert_equal :wait_readable, Narwhal::Arrival.recv(server.fileno, +"", 64)
    client.write("y")
    wait_until { IO.select([server], nil, nil, 0) }
    assert_equal 0.0, Narwhal::Arrival.recv(server.fileno, +"", 64), "a listener without stamps gives none"
    client.close
    wait_until { IO.select([server], nil, nil, 0) }
    assert_nil Narwhal::Arrival.recv(server.fileno, +"", 64)
  ensure
    [server, client, listener].each { |io| io&.close unless io&.closed? }
  end

  def test_unix_sockets_read_without_a_stamp
    a, b = UNIXSocket.pair
    refute Narwhal::Arrival.enable(a.fileno) && Narwhal::Arrival.recv(a.fileno, +"", 1) != :wait_readable
    b.write("hello")
    buf = +""
    assert_equal 0.0, Narwhal::Arrival.recv(a.fileno, buf, 3)
    assert_equal "hel", buf
  ensure
    [a, b].each { |io| io&.close }
  end

  def test_errors_raise_and_a_read_allocates_nothing_but_the_buffer
    r, w = IO.pipe
    assert_raises(Errno::ENOTSOCK) { Narwhal::Arrival.recv(r.fileno, +"", 8) }
    assert_raises(ArgumentError) { Narwhal::Arrival.recv(r.fileno, +"", 0) }
    server, client, listener = tcp_pair
    buf = String.new(capacity: 64)
    fd = server.fileno
    Narwhal::Arrival.recv(fd, buf, 64) # the first call's method cache
    client.write("z" * 500)
    wait_until { IO.select([server], nil, nil, 0) }
    before = GC.stat(:total_allocated_objects)
    stamps = 0
    i = 0
    while i < 50
      stamps += 1 if Narwhal::Arrival.recv(fd, buf, 10).positive?
      i += 1
    end
    allocated = GC.stat(:total_allocated_objects) - before
    assert_equal 50, stamps
    assert_operator allocated, :<, 5, "50 reads: GC.stat's own, none per read"
  ensure
    [r, w, server, client, listener].each { |io| io&.close }
  end

  def test_since_is_the_wait_from_a_stamp_never_below_zero_and_nil_without_one
    now = realtime
    assert_in_delta 0.25, Narwhal::Arrival.since(now - 0.25), 0.05
    assert_equal 0.0, Narwhal::Arrival.since(now + 60), "the wall clock stepped back"
    assert_nil Narwhal::Arrival.since(0.0), "no stamp: a Unix socket's read"
  end
end
