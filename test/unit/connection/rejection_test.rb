# frozen_string_literal: true

require "test_helper"
require "support/connection_harness"

# Narwhal::Connection::Rejection: the 4xx for a request not served, never waited for, then the linger.
class ConnectionRejectionTest < Minitest::Test
  include Narwhal::ConnectionHarness

  def test_a_bad_request_gets_400_then_lingers_then_closes
    assert_equal :keep, send_bytes("GET / HTTP/1.1\r\nBad Header\r\n\r\n"), "lingers to let the client read"
    assert_match(%r{\AHTTP/1.1 400 Bad Request\r\n.*connection: close}m, reply)
    assert_empty @dispatcher.seen
    assert_equal 1, @counters.counts[Narwhal::Scoreboard::REQUESTS_REJECTED]
    assert_equal :keep, send_bytes("more junk"), "what the client still sends is drained"
    @client.close_write
    assert_equal :close, @conn.on_readable
  end

  def test_a_body_over_the_limit_is_refused_with_413
    send_bytes("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 20000\r\n\r\n")
    assert_match(%r{\AHTTP/1.1 413 }, reply)
    assert_empty @dispatcher.seen
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

  def test_a_lingering_connection_closes_past_its_byte_allowance
    send_bytes("GET / HTTP/1.1\r\nBad Header\r\n\r\n")
    assert_match(%r{\AHTTP/1.1 400 }, reply)
    junk = "j" * 65_536
    sent = 0
    action = :keep
    while action == :keep && sent <= 2 * Narwhal::Connection::Rejection::LINGER_MAX_BYTES
      sent += @client.write_nonblock(junk, exception: false).then { |n| n.is_a?(Integer) ? n : 0 }
      action = @conn.on_readable
    end
    assert_equal :close, action
    assert_operator sent, :>, Narwhal::Connection::Rejection::LINGER_MAX_BYTES
  end

  def test_a_lingering_connection_is_due_linger_seconds_later
    with_clock(100.0) do
      @conn = new_connection
      send_bytes("GET / HTTP/1.1\r\nBad Header\r\n\r\n")
      assert_equal 100.0 + Narwhal::Connection::Rejection::LINGER_SECONDS, @conn.deadline
    end
    assert_equal :close, @conn.on_timeout
  end
end
