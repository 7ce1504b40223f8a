# frozen_string_literal: true

require "test_helper"
require "support/connection_harness"

# Narwhal::Connection::WriteBehind: a response's spooled rest sent by #on_writable, and what follows.
class ConnectionWriteBehindTest < Minitest::Test
  include Narwhal::ConnectionHarness

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
end
