# frozen_string_literal: true

require "test_helper"
require "support/connection_harness"

# Narwhal::Connection::Body: a request body read as it arrives into rack.input, its deadline, and Expect: 100-continue.
class ConnectionBodyTest < Minitest::Test
  include Narwhal::ConnectionHarness

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

  def test_100_continue_to_a_client_that_does_not_read_never_waits
    fill_socket # and the writer has no spool budget
    action, took = timed { send_bytes("PUT /u HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n") }
    assert_operator took, :<, 1, "the reactor's thread waited for the client (write_timeout is 5 s)"
    assert_equal :close, action
  end
end
