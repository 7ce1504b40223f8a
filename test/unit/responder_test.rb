# frozen_string_literal: true

require "test_helper"
require "support/fake_out"
require "support/fake_counters"
require "logger"

# The responder with a fake writer: the bytes it writes, the outcome it
# reports, the scoreboard marks and the callbacks it runs.
class ResponderTest < Minitest::Test
  FakeOut = Narwhal::FakeOut # collects what would go to the socket

  class FakeSlot
    attr_reader :marks, :names

    def initialize
      @marks = []
      @names = []
    end

    def request_started(method = nil, path = nil, _fd = -1)
      @names << [method, path].compact
      @marks << :started
    end

    def responding! = nil
    def request_finished = @marks << :finished
    def queue_time(seconds, kind) = @marks << [:queue_time, seconds, kind]
  end

  TEMPLATE = { "SCRIPT_NAME" => "" }.freeze

  # An access log's lines, as AccessLog::Format writes them.
  LineLog = Struct.new(:lines) do
    def write(bytes) = lines << bytes.dup
    def failed(error) = raise(error)
  end

  def setup
    @log = StringIO.new
    @slot = FakeSlot.new
    @counters = FakeCounters.new
  end

  def request(method: "GET", out: FakeOut.new, keepalive: true, http11: true, early_hints: false)
    req = Narwhal::Request.new(TEMPLATE, out, "127.0.0.1", early_hints)
    env = req.start
    env["REQUEST_METHOD"] = method
    env["PATH_INFO"] = "/x"
    req.complete(nil, http11, keepalive)
    req
  end

  def respond(req, &app)
    Narwhal::Responder.new(app, Logger.new(@log), @slot, @counters).respond(req)
  end

  def test_a_response_is_written_and_the_connection_kept
    req = request
    outcome = respond(req) { [200, { "content-type" => "text/plain" }, ["hi"]] }
    assert_equal :keep, outcome
    assert_match(%r{\AHTTP/1.1 200 OK\r\n.*content-length: 2\r\n\r\nhi\z}m, req.out.bytes)
    assert_equal %i[started finished], @slot.marks
    assert_equal [%w[GET /x]], @slot.names, "the slot names the request for the master"
  end

  # Ruby's path (a body, a proxy's header, the access log): a request
  # whose bytes arrived longer ago than queue_deadline is answered 503
  # without the app; the access log records it; one on time is served.
  def test_a_request_that_waited_past_queue_deadline_is_shed_without_the_app
    lines = LineLog.new([])
    access_log = Narwhal::AccessLog::Combined.new(lines)
    responder = Narwhal::Responder.new(->(_env) { flunk "the app was called" }, Logger.new(@log), @slot, @counters,
                                       queue_deadline: 0.2, access_log: access_log)
    req = request
    req.complete(nil, true, true, false, "GET", 1, 0.5)
    assert_equal :close, responder.respond(req)
    assert_match(%r{\AHTTP/1.1 503 Service Unavailable\r\n.*retry-after: 1\r\n}m, req.out.bytes)
    assert_in_delta 0.5, req.env["narwhal.queue_time"], 0.1
    assert_equal [[:queue_time, req.env["narwhal.queue_time"], Narwhal::Scoreboard::QUEUE_TIME_KERNEL]], @slot.marks,
                 "never started: the master's timeout clock is not run for it"
    assert_equal 1, @counters.counts[Narwhal::Scoreboard::REQUESTS_SHED_QUEUE]
    assert_match(/ 503 20 "-" "-" \d+\.\d+ 0\.5\d+ /, lines.lines.join, "its status, body and queue time")
    on_time = request
    on_time.complete(nil, true, true, false, "GET", 1, 0.0)
    served = Narwhal::Responder.new(->(_env) { [204, {}, []] }, Logger.new(@log), @slot, @counters, queue_deadline: 0.2)
    assert_equal :keep, served.respond(on_time)
  end

  def test_without_keepalive_the_response_closes
    req = request(keepalive: false)
    assert_equal :close, respond(req) { [204, {}, []] }
    assert_match(/^connection: close\r\n/, req.out.bytes)
  end

  def test_an_app_error_is_a_logged_500_and_the_callbacks_get_it
    req = request
    seen = nil
    req.env["rack.response_finished"] << ->(_env, status, headers, error) { seen = [status, headers, error] }
    outcome = respond(req) { raise ArgumentError, "boom" }
    assert_equal :close, outcome
    assert_match(%r{\AHTTP/1.1 500 Internal Server Error\r\n}, req.out.bytes)
    assert_match(%r{app error: ArgumentError: boom \(GET /x\)\n.*responder_test}, @log.string)
    assert_equal [nil, nil], seen[0, 2]
    assert_kind_of ArgumentError, seen[2]
    assert_equal 1, @counters.counts[Narwhal::Scoreboard::APP_ERRORS]
    assert_equal %i[started finished], @slot.marks, "the slot is idle again after an error"
  end

  def test_a_500_to_head_has_no_body
    req = request(method: "HEAD")
    respond(req) { raise "boom" }
    assert req.out.bytes.end_with?("\r\n\r\n"), req.out.bytes
  end

  def test_callbacks_run_in_reverse_order_then_after_reply_and_the_body_is_closed
    req = request
    order = []
    body = Object.new
    body.define_singleton_method(:each) { |&b| b.call("x") }
    body.define_singleton_method(:close) { order << :close }
    req.env["rack.response_finished"] << ->(*) { order << :first } << ->(_, status, *) { order << [:second, status] }
    req.env["rack.after_reply"] << -> { order << :after }
    respond(req) { [200, {}, body] }
    assert_equal [:close, [:second, 200], :first, :after], order
  end

  def test_a_client_gone_while_writing_closes_quietly
    req = request(out: FakeOut.new(fail_with: Narwhal::ClientGone.new("EPIPE")))
    assert_equal :close, respond(req) { [200, {}, ["x"]] }
    refute_match(/app error/, @log.string)
  end

  def test_a_full_hijack_is_reported
    req = request
    io = nil
    outcome = respond(req) do |env|
      io = env["rack.hijack"].call
      [200, {}, []]
    end
    assert_equal :release, outcome
    assert_equal :the_socket, io
    assert_equal "", req.out.bytes, "nothing written after a full hijack"
  end

  def test_early_hints_go_out_before_the_response
    req = request(early_hints: true)
    respond(req) do |env|
      env["rack.early_hints"].call("link" => "</a.css>; rel=preload")
      [200, {}, ["ok"]]
    end
    assert_match(%r{\AHTTP/1.1 103 Early Hints\r\nlink: </a.css>; rel=preload\r\n(date: [^\r]+\r\n)?\r\nHTTP/1.1 200 OK},
                 req.out.bytes)
  end

  def test_a_responder_serves_one_request_after_another
    responder = Narwhal::Responder.new(->(_) { raise "first" }, Logger.new(@log), @slot, @counters)
    first = request
    responder.respond(first)
    second = request
    responder.instance_variable_set(:@app, ->(_) { raise "second" })
    responder.respond(second)
    assert_match(/\AHTTP\/1.1 500 /, second.out.bytes, "a failed earlier response does not hide this one's 500")
  end
end
