# frozen_string_literal: true

require "test_helper"
require "support/connection_harness"

# The reading side over a socket pair: requests read and handed on, its
# deadlines, and what the reactor is told to do (the phases have files of
# their own under connection/).
class ConnectionTest < Minitest::Test
  include Narwhal::ConnectionHarness

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
end
