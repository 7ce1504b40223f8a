# frozen_string_literal: true

require "test_helper"
require "support/control_listener_client"

# The control listener's HTTP/1.x over real sockets: one request per
# connection, answered and closed; what is not a request, or too big, or
# too slow, gets its answer or is dropped at its deadline.
class MasterControlExchangeTest < Minitest::Test
  include Narwhal::ControlListenerClient

  # /health and the refusals never read the status; /status reads this.
  STATUS = Struct.new(:to_h).new({ "pid" => 1, "ready" => true, "draining" => false })

  def status = STATUS

  def test_bad_requests_get_an_answer_and_a_close
    client = connect.write("hello there\r\n\r\n")
    assert_equal 400, client.read_response.status
    assert client.closed?
    client = connect.write("GET /#{'a' * 5000}")
    assert_equal 431, client.read_response.status
    assert client.closed?
  end

  # One select loop serves them all: a client that sends nothing, or half
  # a request, does not hold up the next, and is dropped at its deadline.
  def test_silent_and_slow_clients_neither_block_others_nor_stay
    silent = connect
    slow = connect.write("GET /hea")
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    assert_equal 200, get("/health").status
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - started, :<, 0.4, "answered before any deadline"
    assert silent.closed?(timeout: 5), "the silent client is dropped at its deadline"
    assert slow.closed?(timeout: 5), "so is the one that never finished its request"
    assert_equal 200, get("/health").status
  end

  # HEAD: the head alone, then the close.
  def test_head_gets_the_head_and_no_body
    client = connect.write("HEAD /health HTTP/1.1\r\nhost: x\r\n\r\n")
    response = client.read_response(head: true)
    assert_equal [200, "close"], [response.status, response["connection"]]
    assert_equal "", client.read_to_eof, "no body follows"
  end

  # HTTP/1.0 and bare newlines, as a shell script's printf | nc sends them;
  # the request may come in pieces.
  def test_http_1_0_bare_newlines_and_a_request_in_pieces
    client = connect.write("GET /status HTTP/1.0\n")
    client.write("\n")
    response = client.read_response
    assert_equal [200, "application/json"], [response.status, response["content-type"]]
    assert_equal({ "pid" => 1, "ready" => true, "draining" => false }, JSON.parse(response.body))
    assert_equal response.body.bytesize, Integer(response["content-length"])
    assert client.closed?, "one request per connection"
  end

  # A client gone before it asked costs nothing: the next is served.
  def test_a_client_that_leaves_before_asking_is_forgotten
    connect.write("GET /hea").close
    @sockets.pop
    assert_equal [200, "ok\n"], get("/health").then { |r| [r.status, r.body] }
  end
end
