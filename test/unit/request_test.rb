# frozen_string_literal: true

require "test_helper"
require "support/connection_harness"

# Narwhal::Request: the Rack env of each request on a connection, the
# response flags, and what the app reaches through env (hijack, early hints,
# callbacks), over a real SocketWriter on a socket pair.
class RequestTest < Minitest::Test
  TEMPLATE = { "SCRIPT_NAME" => "", "rack.url_scheme" => "http" }.freeze
  Context = Struct.new(:stopping, :shedding, :limits)

  def setup
    @server, @client = UNIXSocket.pair
    @out = Narwhal::SocketWriter.new(@server, 5)
    @request = Narwhal::Request.new(TEMPLATE, @out, "10.0.0.7", true)
  end

  def teardown
    @server.close unless @server.closed?
    @client.close unless @client.closed?
  end

  def start(method = "GET", http11: true, keepalive: true, input: nil)
    env = @request.start
    env["REQUEST_METHOD"] = method
    env["PATH_INFO"] = "/p"
    @request.complete(input, http11, keepalive)
    env
  end

  def received
    @client.read_nonblock(65_536, exception: false).then { |r| r.is_a?(String) ? r : "" }
  end

  def test_each_request_gets_a_fresh_env_from_the_template
    env = start
    assert_equal "10.0.0.7", env["REMOTE_ADDR"]
    assert_equal "http", env["rack.url_scheme"]
    assert_same @request, env["rack.hijack"]
    env["x.app"] = "set by the app"
    @request.finish
    nxt = start
    refute nxt.key?("x.app"), "nothing of the last request's env is left"
    refute TEMPLATE.key?("REMOTE_ADDR"), "the template is not changed"
  end

  def test_flags_say_http11_keepalive_and_head
    start("GET")
    assert_equal Narwhal::Request::HTTP11 | Narwhal::Request::KEEPALIVE, @request.flags
    start("HEAD", http11: false, keepalive: false)
    assert_equal Narwhal::Request::HEAD, @request.flags
    assert @request.head?
    assert_equal "HEAD", @request.request_method
    start("GET")
    @request.close_connection
    assert_equal Narwhal::Request::HTTP11, @request.flags, "the worker sheds the client"
  end

  def test_head_is_known_before_the_request_is_complete
    refute @request.head?, "no request yet"
    @request.start["REQUEST_METHOD"] = "HEAD"
    assert @request.head?
  end

  def test_the_body_becomes_rack_input
    input = Narwhal::Request::Input.new(1024, 5)
    input.take(nil, {}, "hello".b, 0)
    env = start("POST", input: input)
    assert_equal "hello", env["rack.input"].read
  end

  def test_callbacks_are_the_connections_lists_emptied_by_finish
    env = start
    env["rack.response_finished"] << -> {}
    env["rack.after_reply"] << -> {}
    assert_equal [1, 1], [@request.finished_callbacks.size, @request.after_reply.size]
    @request.finish
    assert_nil @request.env
    assert_equal [0, 0], [@request.finished_callbacks.size, @request.after_reply.size]
  end

  def test_a_new_remote_address_is_in_the_next_env
    @request.remote_addr = "192.0.2.1"
    assert_equal "192.0.2.1", start["REMOTE_ADDR"]
  end

  def test_hijack_hands_over_the_socket_after_what_was_written
    env = start
    @out.write("before ")
    io = env["rack.hijack"].call
    assert_same @server, io
    assert_same @server, env["rack.hijack_io"]
    assert @request.hijacked?
    io.write("after")
    assert_equal "before after", received
  end

  def test_early_hints_go_to_http11_clients_only
    env = start
    assert_nil env["rack.early_hints"].call({ "link" => "</a.css>; rel=preload" })
    assert_match(%r{\AHTTP/1.1 103 Early Hints\r\nlink: </a.css>; rel=preload\r\n}, received)
    env = start("GET", http11: false)
    env["rack.early_hints"].call({ "link" => "</b.css>" })
    assert_equal "", received
    without = Narwhal::Request.new(TEMPLATE, @out, "10.0.0.7").start
    refute without.key?("rack.early_hints"), "offered only when early_hints is on"
  end

  def test_a_graceful_stop_ends_keep_alive_when_the_head_is_written
    context = Context.new(false, nil, nil)
    @request = Narwhal::Request.new(TEMPLATE, @out, "10.0.0.7", false, context)
    start
    context.stopping = true
    assert_equal Narwhal::Request::HTTP11, @request.flags
  end

  def test_the_last_request_keepalive_requests_allows_closes
    limits = Narwhal::ConnectionHarness::LIMITS.dup.tap { |l| l.keepalive_requests = 3 }
    @request = Narwhal::Request.new(TEMPLATE, @out, "10.0.0.7", false, Context.new(false, nil, limits))
    keeps = (1..4).map do |n|
      @request.start["REQUEST_METHOD"] = "GET"
      @request.complete(nil, true, true, false, "GET", n)
      @request.flags & Narwhal::Request::KEEPALIVE != 0
    end
    assert_equal [true, true, false, false], keeps
  end

  Siblings = Struct.new(:sibling_idle?)

  # keepalive_rebalance: a request that waited past it on a kept-alive
  # connection (not its first) while a sibling has an idle thread lets the
  # connection go; a first request, one that did not wait that long or
  # whose wait is unknown keeps it, and all of them do with no sibling idle.
  def test_a_request_that_waited_on_a_kept_alive_connection_lets_it_go
    limits = Narwhal::ConnectionHarness::LIMITS.dup.tap { |l| l.keepalive_rebalance = 0.01 }
    siblings = Siblings.new(true)
    @request = Narwhal::Request.new(TEMPLATE, @out, "10.0.0.7", false, Context.new(false, siblings, limits))
    keeps = [[1, 0.5], [2, 0.5], [2, 0.009], [2, nil], [3, 0.011]].map do |requests, waited|
      @request.start["REQUEST_METHOD"] = "GET"
      @request.complete(nil, true, true, false, "GET", requests, waited)
      [@request.waited, @request.flags & Narwhal::Request::KEEPALIVE != 0]
    end
    assert_equal [[0.5, true], [0.5, false], [0.009, true], [nil, true], [0.011, false]], keeps
    siblings[:sibling_idle?] = false
    @request.start["REQUEST_METHOD"] = "GET"
    @request.complete(nil, true, true, false, "GET", 2, 5.0)
    refute_equal 0, @request.flags & Narwhal::Request::KEEPALIVE, "every worker busy: the wait would only move"
    limits.keepalive_rebalance = nil
    @request = Narwhal::Request.new(TEMPLATE, @out, "10.0.0.7", false, Context.new(false, nil, limits))
    @request.start["REQUEST_METHOD"] = "GET"
    @request.complete(nil, true, true, false, "GET", 2, 5.0)
    refute_equal 0, @request.flags & Narwhal::Request::KEEPALIVE, "off"
  end
end
