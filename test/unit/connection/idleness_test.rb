# frozen_string_literal: true

require "test_helper"
require "support/connection_harness"

# Narwhal::Connection::Idleness: whether a connection may be closed for room (#idle?, #silent?).
class ConnectionIdlenessTest < Minitest::Test
  include Narwhal::ConnectionHarness

  # A connection taken from the listen queue whose request waits in its
  # socket unread (a drain, or every thread busy) has sent bytes: at the
  # connection limit it must not be closed as if it had sent none.
  def test_a_connection_with_a_request_waiting_unread_is_not_silent
    assert @conn.silent?, "accepted, nothing sent"
    @client.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    wait_until(message: "the request at the server") { @server.wait_readable(0) }
    refute @conn.silent?
  end

  def test_a_new_connection_is_not_idle_its_first_request_is_on_its_way
    refute @conn.idle?
    send_bytes("GET / HTTP/1.1\r\n")
    refute @conn.idle?, "halfway through a head"
    refute @conn.silent?, "it has sent bytes"
  end

  def test_between_kept_alive_requests_it_is_idle_and_no_longer_silent
    send_bytes("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert @conn.idle?
    refute @conn.silent?, "it sent a request: idle, not silent"
    send_bytes("G")
    refute @conn.idle?, "the next request began"
  end

  def test_a_connection_reading_a_body_is_neither
    send_bytes("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nab")
    refute @conn.idle?
    refute @conn.silent?
  end

  def test_a_closed_socket_is_not_silent
    @server.close
    refute @conn.silent?, "nothing can be known of a closed socket: not counted as silent"
  end
end
