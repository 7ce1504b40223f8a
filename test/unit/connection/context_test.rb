# frozen_string_literal: true

require "test_helper"
require "support/connection_harness"

# Narwhal::Connection::Context: what every connection of a process shares; its stopping flag turns keep-alive off.
class ConnectionContextTest < Minitest::Test
  include Narwhal::ConnectionHarness

  def test_a_graceful_stop_turns_keepalive_off
    conn = new_connection(stopping: true)
    @client.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    conn.on_readable
    assert_equal Narwhal::Request::HTTP11, @dispatcher.seen.first[:flags]
  end

  def test_it_holds_what_it_was_given
    context = Narwhal::Connection::Context.new(LIMITS, @dispatcher, :logger, @counters, false, :access_log)
    assert_same LIMITS, context.limits
    assert_same @dispatcher, context.dispatcher
    assert_equal %i[logger access_log], [context.logger, context.access_log]
    assert_nil Narwhal::Connection::Context.new(LIMITS).access_log, "no access log unless given"
  end

  # One context is shared by every connection: a stop that begins while a
  # connection is open turns keep-alive off for its next request.
  def test_stopping_set_later_reaches_connections_already_open
    send_bytes("GET /1 HTTP/1.1\r\nHost: x\r\n\r\n")
    @context.stopping = true
    assert_equal :close, send_bytes("GET /2 HTTP/1.1\r\nHost: x\r\n\r\n")
    assert_equal [Narwhal::Request::HTTP11 | Narwhal::Request::KEEPALIVE, Narwhal::Request::HTTP11],
                 @dispatcher.seen.map { |r| r[:flags] }
  end

  # Requests refused while being read go to the context's access log.
  def test_a_refused_request_is_given_to_the_access_log
    refused = []
    log = Object.new
    log.define_singleton_method(:refused) { |env, status, bytes| refused << [env["PATH_INFO"], status, bytes] }
    @context.access_log = log
    send_bytes("GET /p HTTP/1.1\r\nHost: x\r\nContent-Length: 20000\r\n\r\n")
    assert_match(%r{\AHTTP/1.1 413 }, reply)
    assert_equal [["/p", 413, "Content Too Large\n".bytesize]], refused
  end
end
