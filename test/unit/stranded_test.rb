# frozen_string_literal: true

require "test_helper"

# Stranded: the master's answer on a stopped child's sockets, the way it
# answers a worker killed for timeout: on the socket named, and on each
# connection accepted from one of its listeners that holds unread bytes,
# never on another socket of the child's (the app's database, say).
class StrandedTest < Minitest::Test
  def setup
    @listener = TCPServer.new("127.0.0.1", 0)
    @other = TCPServer.new("127.0.0.1", 0) # not one of ours: a database's port, say
    @clients = []
  end

  def teardown
    if @child
      Process.kill(:KILL, @child)
      Process.wait(@child)
    end
    (@clients + [@listener, @other]).each { |io| io.close unless io.closed? }
  end

  def client_of(server)
    TCPSocket.new("127.0.0.1", server.addr[1]).tap { |c| @clients << c }
  end

  # A child holding the server side of each of conns, stopped.
  def stopped_child_holding(conns)
    @child = fork { sleep 30 }
    conns.each(&:close) # the child's copies are the only ones
    Process.kill(:STOP, @child)
    wait_until(message: "the child stopped") { File.read("/proc/#{@child}/stat").split[2] == "T" }
  end

  def read_all(client)
    client.read
  rescue Errno::ECONNRESET => e
    flunk "reset: #{e.message}"
  end

  def test_the_named_socket_gets_the_answer_then_its_end
    client = client_of(@listener)
    served = @listener.accept
    client.write("GET /stuck HTTP/1.1\r\nHost: t\r\n\r\nGET /next HTTP/1.1\r\n") # the next is never read
    fd = served.fileno
    stopped_child_holding([served])
    assert_equal 9, Narwhal::Stranded.answer(@child, fd, "HTTP 504\n")
    assert_equal "HTTP 504\n", read_all(client), "the answer, then the end, not a reset"
    assert_nil Narwhal::Stranded.answer(@child, 999, "x"), "no such descriptor"
  end

  def test_waiting_requests_on_our_connections_are_answered_and_no_other_socket
    waiting, idle, answered = Array.new(3) { client_of(@listener) }
    accepted = Array.new(3) { @listener.accept }
    waiting.write("GET /waited HTTP/1.1\r\nHost: t\r\n\r\n")
    answered.write("GET /stuck HTTP/1.1\r\nHost: t\r\n\r\n")
    database = client_of(@other)
    db_side = @other.accept
    db_side.write("a reply the app has not read")
    wait_until(message: "bytes in the sockets") { IO.select(accepted.values_at(0, 2) + [database], nil, nil, 0)&.first&.size == 3 }
    skip_fd = accepted[2].fileno
    stopped_child_holding(accepted + [database])
    count = Narwhal::Stranded.answer_waiting(@child, [@listener.fileno], [skip_fd], "HTTP 503\n")
    assert_equal 1, count
    assert_equal "HTTP 503\n", read_all(waiting)
    refute IO.select([idle, answered], nil, nil, 0.1), "no answer where nothing waited, nor on the one skipped"
    refute IO.select([db_side], nil, nil, 0), "the app's other socket untouched"
  ensure
    db_side&.close
  end
end
