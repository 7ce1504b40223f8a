# frozen_string_literal: true

require "test_helper"
require "support/connection_harness"

# Narwhal::Connection::LoopResults: what the C loop (RequestLoop) leaves a
# connection to do, with a real Responder and RequestLoop over a socket pair.
class ConnectionLoopResultsTest < Minitest::Test
  include Narwhal::ConnectionHarness

  GET = "GET %s HTTP/1.1\r\nHost: x\r\n\r\n"

  def setup
    super
    @app = lambda do |env|
      [200, { "content-type" => "text/plain" }, [env["PATH_INFO"] == "/big" ? "a" * BIG : "hi #{env['PATH_INFO']}"]]
    end
    @conn = looping
  end

  # A connection whose dispatcher has a RequestLoop, as a worker's has
  # without an access log; budget: its writer spools what the socket does not take.
  def looping(budget: nil)
    slot = Narwhal::Scoreboard.new(1).thread_slot(0, 0)
    responder = Narwhal::Responder.new(@app, Logger.new(@log), slot, @counters,
                                       keep_alive: Narwhal::ResponseWriter.keep_alive_line(5))
    @dispatcher = Narwhal::Dispatcher::Inline.new(responder)
    @context = Narwhal::Connection::Context.new(LIMITS, @dispatcher, Logger.new(@log), @counters, false)
    @request = Narwhal::Request.new(TEMPLATE, Narwhal::SocketWriter.new(@server, 5, budget), "10.0.0.1")
    Narwhal::Connection.new(@server, @request, @context)
  end

  def bodies(bytes)
    bytes.scan(/\r\n\r\n(hi \S+?)(?=HTTP|\z)/).flatten
  end

  def test_the_loop_serves_whole_requests_and_leaves_a_partial_one_to_ruby
    refute_nil @dispatcher.request_loop, "the C loop is in use"
    assert_equal :keep, send_bytes((GET % "/a") + (GET % "/b") + "GET /c HTTP/1.1\r\nHo")
    assert_equal ["hi /a", "hi /b"], bodies(reply)
    refute @conn.idle?, "a request is half read"
    assert_equal :keep, send_bytes("st: x\r\n\r\n")
    assert_equal ["hi /c"], bodies(reply)
    assert @conn.idle?
  end

  def test_a_request_that_asks_to_close_closes
    assert_equal :close, send_bytes("GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert_match(%r{\r\nconnection: close\r\n\r\nhi /a\z}, reply)
  end

  def test_the_client_closing_after_its_requests_closes
    @client.write(GET % "/a")
    @client.close_write
    # a short read ends a pass (the socket is drained): the end is read at the next
    actions = [@conn.on_readable]
    actions << @conn.on_readable if actions.last == :keep
    assert_equal :close, actions.last, actions.inspect
    assert_equal ["hi /a"], bodies(reply)
  end

  def test_a_response_the_socket_does_not_take_is_finished_from_the_spool
    budget = Narwhal::SocketWriter::SpoolBudget.new(64 * 1024 * 1024, 64 * 1024, disk_reserve: 0)
    @conn = looping(budget: budget)
    assert_equal :write, send_bytes((GET % "/big") + (GET % "/next"))
    action, got = send_rest
    assert_equal :keep, action
    assert_equal BIG, got[/\r\n\r\n(a+)/, 1].bytesize
    assert_equal ["hi /next"], bodies(got), "the pipelined request served once the spool was sent"
    assert_equal 0, budget.used
  end

  def test_deadlines_after_the_loop_served_and_after_nothing_came
    with_clock(100.0) do
      @conn = looping
      assert_equal :keep, @conn.on_readable, "nothing to read"
      assert_equal 100.0 + LIMITS.client_header_timeout, @conn.deadline, "the first request is timed from accept"
      @now = 102.0
      send_bytes(GET % "/a")
      assert_equal 102.0 + LIMITS.keepalive_timeout, @conn.deadline
    end
  end

  # What Connection::Factory hands on after RequestLoop#accept_serve.
  def test_served_first_with_bytes_left_reads_on_from_them
    assert_equal :keep, @conn.served_first(:keep, 1, +"GET /x HTTP/1.1\r\nHo".b, 0.0)
    refute @conn.idle?
    assert_equal :keep, send_bytes("st: x\r\n\r\n")
    assert_equal ["hi /x"], bodies(reply)
    assert_equal :close, @conn.served_first(:close, 2, nil, 0.0)
  end
end
