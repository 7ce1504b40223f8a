# frozen_string_literal: true

require "test_helper"

# The line between sibling workers: a connection given with its listener's
# index and request count is taken as the same socket, with what its
# client sent meanwhile still to read; a full line keeps the connection
# with the giver.
class HandOffTest < Minitest::Test
  def setup
    @line = Narwhal::Dispatcher::HandOff.open
    @server = TCPServer.new("127.0.0.1", 0)
    @open = [@server]
  end

  def teardown
    @open.each { |io| io.close unless io.closed? }
    [@line.inbox_io].each { |io| io.close unless io.closed? }
  end

  def connection
    client = TCPSocket.new("127.0.0.1", @server.addr[1])
    served = @server.accept
    @open.push(client, served)
    [client, served]
  end

  def test_a_connection_moves_with_what_its_client_sent
    client, served = connection
    assert @line.give(served, 1, 7)
    served.close # the giver's descriptor; the message holds the connection
    client.write("GET / HTTP/1.1\r\n\r\n")
    taken = @line.take
    @open << taken.io
    assert_equal [1, 7], [taken.origin, taken.requests]
    assert_equal "GET / HTTP/1.1\r\n\r\n", taken.io.readpartial(100)
    taken.io.write("ok")
    assert_equal "ok", client.readpartial(10), "the same connection, both ways"
    assert_equal :wait_readable, @line.take
  end

  def test_a_full_line_keeps_the_connection
    given = 0
    given += 1 while given < 1000 && @line.give(connection.last, 0, 1)
    assert_operator given, :<, 1000, "the line holds a bounded number"
    _, kept = connection
    refute @line.give(kept, 0, 1)
    assert_equal 0, @line.take.origin, "what fit is still there"
  end

  def test_only_shared_listeners_have_an_origin
    shared = [Object.new, Object.new]
    line = @line.among(shared)
    assert_equal 1, line.origin(shared[1])
    assert_nil line.origin(Object.new), "one after_fork added stays in its worker"
  end
end
