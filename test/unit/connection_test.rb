# frozen_string_literal: true

require "test_helper"
require "support/fake_counters"
require "minitest/mock"
require "socket"
require "logger"

# The reading side over a socket pair: what the dispatcher is handed, what
# the client reads back, and what the reactor is told to do.
class ConnectionTest < Minitest::Test
  Limits = Narwhal::Server::Limits
  LIMITS = Limits.new(body_buffer_size: 1024, max_body_size: 10_000, max_request_line: 1024,
                      max_header_size: 4096, max_header_fields: 50, keepalive_timeout: 5,
                      keepalive_requests: 100, client_header_timeout: 10, client_body_timeout: 3,
                      write_timeout: 5).freeze
  TEMPLATE = { "rack.input" => Narwhal::Request::NullInput::INSTANCE, "SCRIPT_NAME" => "" }.freeze

  # Records each request as the app would see it; answers with outcome.
  class FakeDispatcher
    attr_reader :seen
    attr_accessor :outcome, :on_dispatch

    def initialize
      @seen = []
      @outcome = Narwhal::Responder::KEEP
    end

    # Every request comes here, through Connection's Ruby path.
    def request_loop; end

    def dispatch(request, _connection)
      env = request.env
      body = env["rack.input"]&.read
      @seen << { method: env["REQUEST_METHOD"], path: env["PATH_INFO"], body: body, flags: request.flags,
                 remote: env["REMOTE_ADDR"] }
      on_dispatch&.call(request)
      # as the Responder: a response whose head says close ends the connection
      keep = request.flags & Narwhal::Request::KEEPALIVE != 0
      @outcome == Narwhal::Responder::KEEP && !keep ? Narwhal::Responder::CLOSE : @outcome
    end
  end

  def setup
    @server, @client = UNIXSocket.pair
    @dispatcher = FakeDispatcher.new
    @counters = FakeCounters.new
    @log = StringIO.new
    @conn = new_connection
  end

  def new_connection
    context = Narwhal::Connection::Context.new(LIMITS, @dispatcher, Logger.new(@log), @counters, false)
    out = Narwhal::SocketWriter.new(@server, 5)
    @request = Narwhal::Request.new(TEMPLATE, out, "10.0.0.1")
    Narwhal::Connection.new(@server, @request, context)
  end

  # Runs the block with Clock.now reading @now (set it to move time).
  def with_clock(start)
    @now = start
    Narwhal::Clock.stub(:now, -> { @now }) { yield }
  end

  def teardown
    @server.close unless @server.closed?
    @client.close unless @client.closed?
  end

  def send_bytes(bytes)
    @client.write(bytes)
    @conn.on_readable
  end

  def reply
    @client.read_nonblock(65_536, exception: false).then { |r| r == :wait_readable ? "" : r.to_s }
  end

  def test_a_request_sent_byte_by_byte_is_dispatched_once_complete
    request = "GET /a?b=1 HTTP/1.1\r\nHost: x\r\n\r\n"
    request[0...-1].each_char do |c|
      assert_equal :keep, send_bytes(c)
    end
    assert_empty @dispatcher.seen
    assert_equal :keep, send_bytes(request[-1])
    assert_equal [{ method: "GET", path: "/a", body: "", remote: "10.0.0.1",
                    flags: Narwhal::Request::HTTP11 | Narwhal::Request::KEEPALIVE }], @dispatcher.seen
    assert @conn.idle?, "between requests on a kept-alive connection"
  end

  def test_pipelined_requests_are_dispatched_in_order_from_one_read
    # the second, HTTP/1.0 without keep-alive, is the connection's last
    assert_equal :close, send_bytes("GET /1 HTTP/1.1\r\nHost: x\r\n\r\nHEAD /2 HTTP/1.0\r\n\r\n")
    assert_equal [%w[GET /1], %w[HEAD /2]], @dispatcher.seen.map { |r| [r[:method], r[:path]] }
    assert_equal Narwhal::Request::HEAD, @dispatcher.seen[1][:flags], "HTTP/1.0, no keep-alive, HEAD"
  end

  def test_the_body_reaches_rack_input_and_the_env_is_fresh_per_request
    send_bytes("POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhel")
    assert_empty @dispatcher.seen
    send_bytes("loGET /g HTTP/1.1\r\nHost: x\r\n\r\n")
    assert_equal [["POST", "hello"], ["GET", ""]], @dispatcher.seen.map { |r| [r[:method], r[:body]] }
  end

  def test_expect_100_continue_is_answered_before_the_body
    send_bytes("PUT /u HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n")
    assert_equal "HTTP/1.1 100 Continue\r\n\r\n", reply
    send_bytes("abc")
    assert_equal "abc", @dispatcher.seen.first[:body]
  end

  def test_a_bad_request_gets_400_then_lingers_then_closes
    assert_equal :keep, send_bytes("GET / HTTP/1.1\r\nBad Header\r\n\r\n"), "lingers to let the client read"
    assert_match(%r{\AHTTP/1.1 400 Bad Request\r\n.*connection: close}m, reply)
    assert_empty @dispatcher.seen
    assert_equal 1, @counters.counts[Narwhal::Scoreboard::REQUESTS_REJECTED]
    assert_equal :keep, send_bytes("more junk"), "what the client still sends is drained"
    @client.close_write
    assert_equal :close, @conn.on_readable
  end

  def test_a_request_cut_short_by_its_deadline_gets_408
    send_bytes("GET / HTTP/1.1\r\nHost:")
    assert_equal :close, @conn.on_timeout
    assert_match(%r{\AHTTP/1.1 408 Request Timeout\r\n}, reply)
  end

  def test_an_idle_connection_past_its_deadline_closes_without_a_word
    assert_equal :close, @conn.on_timeout
    assert_equal "", reply
  end

  def test_the_first_head_is_due_the_header_timeout_after_accept_however_it_trickles
    with_clock(100.0) do
      @conn = new_connection # accepted at 100
      assert_equal 110.0, @conn.deadline
      @now = 104.0
      send_bytes("GET / HTTP/1.1\r\n")
      @now = 109.5
      send_bytes("Host: x\r\n")
      assert_equal 110.0, @conn.deadline, "bytes of the head do not move it"
      send_bytes("\r\n")
      assert_equal 109.5 + LIMITS.keepalive_timeout, @conn.deadline, "then the keep-alive timeout"
    end
  end

  def test_a_later_head_is_due_the_header_timeout_after_its_first_byte
    with_clock(100.0) do
      @conn = new_connection
      send_bytes("GET /1 HTTP/1.1\r\nHost: x\r\n\r\n")
      @now = 104.0
      send_bytes("G")
      assert_equal 114.0, @conn.deadline
      @now = 113.0
      send_bytes("ET /2 HTTP/1.1\r\nHost: x\r\n")
      assert_equal 114.0, @conn.deadline, "bytes of the head do not move it"
    end
    assert_equal :close, @conn.on_timeout
    assert_match(%r{\AHTTP/1.1 408 Request Timeout\r\n}, reply)
  end

  def test_the_body_deadline_moves_with_each_read_of_body_bytes
    with_clock(100.0) do
      @conn = new_connection
      send_bytes("POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n")
      assert_equal 100.0 + LIMITS.client_body_timeout, @conn.deadline, "from the end of the head"
      [102.0, 104.5, 107.0].each_with_index do |now, i|
        @now = now
        send_bytes(%w[abc def gh][i])
        assert_equal now + LIMITS.client_body_timeout, @conn.deadline, "progress at #{now}"
      end
      assert_empty @dispatcher.seen
      @now = 109.9 # 12.9 s after the head started: past the header timeout, the body still moves
      send_bytes("i")
      assert_equal "abcdefghi", @dispatcher.seen.first[:body]
      assert_equal 109.9 + LIMITS.keepalive_timeout, @conn.deadline
    end
  end

  def test_a_stalled_body_gets_408
    send_bytes("POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\nabc")
    assert_equal :close, @conn.on_timeout
    assert_match(%r{\AHTTP/1.1 408 Request Timeout\r\n}, reply)
    assert_empty @dispatcher.seen
  end

  def test_the_outcome_decides_the_connection
    @dispatcher.outcome = Narwhal::Responder::CLOSE
    assert_equal :close, send_bytes("GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /never HTTP/1.1\r\n\r\n")
    assert_equal 1, @dispatcher.seen.size, "nothing after a response that closes"
  end

  def test_a_hijacked_connection_is_released_not_closed
    @dispatcher.on_dispatch = ->(request) { request.env["rack.hijack"].call }
    assert_equal :release, send_bytes("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    @conn.close
    refute @server.closed?, "the app owns the socket now"
  end

  def test_the_client_closing_closes_the_connection
    @client.close
    assert_equal :close, @conn.on_readable
    @conn.close
    assert @server.closed?
  end

  def test_a_graceful_stop_turns_keepalive_off
    context = Narwhal::Connection::Context.new(LIMITS, @dispatcher, Logger.new(@log), @counters, true)
    conn = Narwhal::Connection.new(@server, @request, context)
    @client.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    conn.on_readable
    assert_equal Narwhal::Request::HTTP11, @dispatcher.seen.first[:flags]
  end

  BIG = 4 * 1024 * 1024 # more than a socket pair buffers

  # The connection with a writer that spools, as a worker's are; the app
  # answers /big with more than the socket takes.
  def spooling(keepalive: true)
    @budget = Narwhal::SocketWriter::SpoolBudget.new(64 * 1024 * 1024, 64 * 1024, disk_reserve: 0)
    context = Narwhal::Connection::Context.new(LIMITS, @dispatcher, Logger.new(@log), @counters, !keepalive)
    @request = Narwhal::Request.new(TEMPLATE, Narwhal::SocketWriter.new(@server, 5, @budget), "10.0.0.1")
    @conn = Narwhal::Connection.new(@server, @request, context)
    @dispatcher.on_dispatch = ->(request) { request.out.write("a" * BIG) if request.env["PATH_INFO"] == "/big" }
  end

  # The reactor's part while the client reads: on_writable until it is
  # done; returns its last answer and the bytes read.
  def send_rest
    got = +""
    action = :write
    while action == :write
      got << reply
      action = @conn.on_writable
    end
    got << reply while @client.wait_readable(0)
    [action, got]
  end

  def test_a_response_left_spooled_is_finished_by_on_writable_then_pipelined_requests_follow
    spooling
    assert_equal :write, send_bytes("GET /big HTTP/1.1\r\nHost: x\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n")
    assert_equal %w[/big], @dispatcher.seen.map { |r| r[:path] }, "the next waits for the spool to be sent"
    refute @conn.idle?, "still sending"
    assert_in_delta Narwhal::Clock.now + LIMITS.write_timeout, @conn.deadline, 1
    action, got = send_rest
    assert_equal :keep, action
    assert_equal %w[/big /next], @dispatcher.seen.map { |r| r[:path] }
    assert_equal BIG, got.bytesize
    assert_equal 0, @budget.used
  end

  def test_a_client_that_reads_nothing_times_out_with_a_log_line
    spooling
    assert_equal :write, send_bytes("GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
    assert_equal :write, @conn.on_writable
    assert_equal :close, @conn.on_timeout
    assert_match(%r{write timeout: client took no data for 5s, closing \(GET /big\)}, @log.string)
    @conn.close
    assert_equal 0, @budget.used, "the spool is freed with the connection"
  end

  def test_a_response_that_closes_the_connection_is_sent_first
    spooling
    @dispatcher.outcome = Narwhal::Responder::CLOSE
    assert_equal :write, send_bytes("GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
    assert_equal [:close, BIG], send_rest.then { |action, got| [action, got.bytesize] }
  end

  def test_while_stopping_a_connection_closes_once_its_response_is_sent
    spooling(keepalive: false)
    assert_equal :write, send_bytes("GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
    assert_equal :close, send_rest.first
  end

  def test_a_response_the_socket_takes_whole_keeps_the_connection_at_once
    spooling
    assert_equal :keep, send_bytes("GET /small HTTP/1.1\r\nHost: x\r\n\r\n")
    assert @conn.idle?
  end

  # A connection taken from the listen queue whose request waits in its
  # socket unread (a drain, or every thread busy) has sent bytes: at the
  # connection limit it must not be closed as if it had sent none.
  def test_a_connection_with_a_request_waiting_unread_is_not_silent
    assert @conn.silent?, "accepted, nothing sent"
    @client.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    wait_until(message: "the request at the server") { @server.wait_readable(0) }
    refute @conn.silent?
  end

  def test_a_body_over_the_limit_is_refused_with_413
    send_bytes("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 20000\r\n\r\n")
    assert_match(%r{\AHTTP/1.1 413 }, reply)
    assert_empty @dispatcher.seen
  end

  # What the client has not read of earlier responses: the socket takes
  # nothing more (pipelined requests whose answers it never reads).
  def fill_socket
    filler = "f" * 65_536
    filled = 0
    while (n = @server.write_nonblock(filler, exception: false)) != :wait_writable
      filled += n
    end
    filled
  end

  def timed
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    result = yield
    [result, Process.clock_gettime(Process::CLOCK_MONOTONIC) - started]
  end

  def test_an_error_response_to_a_client_that_does_not_read_is_spooled_not_waited_for
    spooling
    filled = fill_socket
    action, took = timed { send_bytes("GET / HTTP/1.1\r\nBad Header\r\n\r\n") }
    assert_operator took, :<, 1, "the reactor's thread waited for the client (write_timeout is 5 s)"
    assert_equal :write, action, "the 400 waits in the spool for the client"
    assert_equal 1, @counters.counts[Narwhal::Scoreboard::REQUESTS_REJECTED]
    got = +""
    action = :write
    while action == :write
      got << reply
      action = @conn.on_writable
    end
    assert_equal :keep, action, "sent: it lingers, draining what the client still sends"
    got << @client.read # to the end: our side is shut down
    assert_match(%r{\AHTTP/1.1 400 Bad Request\r\n.*connection: close}m, got.byteslice(filled..))
    @client.close_write
    assert_equal :close, @conn.on_readable
    assert_equal 0, @budget.used
  end

  def test_an_error_response_that_can_be_neither_sent_nor_spooled_closes_at_once
    fill_socket # and the writer has no spool budget
    action, took = timed { send_bytes("GET / HTTP/1.1\r\nBad Header\r\n\r\n") }
    assert_operator took, :<, 1, "the reactor's thread waited for the client (write_timeout is 5 s)"
    assert_equal :close, action
  end

  def test_a_408_to_a_client_that_does_not_read_never_waits
    spooling
    fill_socket
    send_bytes("GET / HTTP/1.1\r\nHost:")
    action, took = timed { @conn.on_timeout }
    assert_operator took, :<, 1, "the reactor's thread waited for the client (write_timeout is 5 s)"
    assert_equal :close, action
    refute_match(/write timeout/, @log.string, "no write timed out")
    @conn.close
    assert_equal 0, @budget.used, "the spooled 408 is freed with the connection"
  end

  def test_100_continue_to_a_client_that_does_not_read_never_waits
    fill_socket # and the writer has no spool budget
    action, took = timed { send_bytes("PUT /u HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n") }
    assert_operator took, :<, 1, "the reactor's thread waited for the client (write_timeout is 5 s)"
    assert_equal :close, action
  end
end
