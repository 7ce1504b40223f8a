# frozen_string_literal: true

require "test_helper"
require "support/fake_counters"
require "logger"

# The responder with a fake writer: the bytes it writes, the outcome it
# reports, the scoreboard marks and the callbacks it runs.
class ResponderTest < Minitest::Test
  # Collects what would go to the socket.
  class FakeOut
    attr_reader :bytes, :io

    def initialize(fail_with: nil)
      @bytes = +""
      @io = :the_socket
      @fail_with = fail_with
    end

    def write(str)
      raise @fail_with if @fail_with

      @bytes << str
    end

    def flush; end
  end

  class FakeSlot
    attr_reader :marks, :names

    def initialize
      @marks = []
      @names = []
    end

    def request_started(*names)
      @names << names
      @marks << :started
    end
    def request_finished = @marks << :finished
  end

  TEMPLATE = { "SCRIPT_NAME" => "" }.freeze

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

  # --- soft_timeout: a real watchdog over a real scoreboard slot ---

  # A FakeOut whose first write of a body chunk takes `slow` seconds.
  class SlowOut < FakeOut
    def initialize(slow)
      super()
      @slow = slow
    end

    def write(str)
      if @slow && @bytes.include?("\r\n\r\n")
        slow = @slow
        @slow = nil
        sleep(slow)
      end
      super
    end
  end

  def soft_responder(app, seconds: 0.1)
    board = Narwhal::Scoreboard.new(1)
    @thread_slot = board.thread_slot(0, 0)
    @soft = Narwhal::Responder::SoftTimeout.new(seconds, Logger.new(@log)).start
    @interrupted = 0
    watch = @soft.watch(Thread.current, @thread_slot)
    Narwhal::Responder::Watched.new(app, Logger.new(@log), @thread_slot, @counters,
                                  soft_timeout: watch, on_timeout: -> { @interrupted += 1 })
  end

  def teardown
    @soft&.stop
  end

  def slow_body(first)
    body = Object.new
    body.define_singleton_method(:each) do |&b|
      b.call(first)
      sleep 10
      b.call("never")
    end
    body
  end

  def test_a_soft_timeout_is_a_logged_503_and_the_worker_is_told
    req = request
    seen = nil
    ensured = false
    req.env["rack.response_finished"] << ->(_env, status, _headers, error) { seen = [status, error] }
    responder = soft_responder(lambda do |_env|
      sleep 10
    rescue StandardError
      [200, {}, ["an app's rescue => e must not swallow it"]]
    ensure
      ensured = true
    end)
    assert_equal :close, responder.respond(req)
    assert ensured, "the app's ensure ran"
    assert_match(%r{\AHTTP/1.1 503 Service Unavailable\r\n.*^connection: close\r\n}m, req.out.bytes)
    line = %r{request timeout: GET /x ran \d\.\d+s, past soft_timeout \(0\.1s\); answered 503, closing\n}
    assert_match(/#{line}.*responder_test\.rb:\d+:in `sleep'/, @log.string)
    assert_nil seen[0]
    assert_kind_of Narwhal::RequestTimeout, seen[1]
    assert_equal 1, @counters.counts[Narwhal::Scoreboard::REQUEST_TIMEOUTS]
    assert_equal 0, @counters.counts[Narwhal::Scoreboard::APP_ERRORS]
    assert_equal 1, @interrupted
    assert_nil @thread_slot.busy_for, "the slot is idle again"
    assert_equal 1, @thread_slot.requests
  end

  def test_a_soft_timeout_after_response_bytes_went_out_closes_without_a_503
    req = request
    responder = soft_responder(->(_env) { [200, {}, slow_body("first")] })
    assert_equal :close, responder.respond(req)
    assert_match(%r{\AHTTP/1.1 200 OK\r\n.*\r\n\r\n5\r\nfirst\r\n\z}m, req.out.bytes)
    assert_match(%r{request timeout: GET /x ran \d\.\d+s, past soft_timeout \(0\.1s\); response cut short, closing},
                 @log.string)
    assert_equal 1, @interrupted
  end

  # The timeout passes during a slow socket write: the write completes,
  # the body's next step is cut.
  def test_a_write_in_progress_is_never_cut
    req = request(out: SlowOut.new(0.5))
    body = Object.new
    body.define_singleton_method(:each) { |&b| %w[aaaa bbbb cccc].each(&b) }
    responder = soft_responder(->(_env) { [200, {}, body] })
    assert_equal :close, responder.respond(req)
    assert req.out.bytes.end_with?("\r\n\r\n4\r\naaaa\r\n"), req.out.bytes
    assert_equal 1, @interrupted
  end

  # Rescued by the app (an error page middleware rescues Exception): its
  # answer goes out, but the interruption is logged and reported.
  def test_an_app_that_rescues_the_timeout_answers_but_the_worker_is_told
    req = request
    responder = soft_responder(lambda do |_env|
      sleep 10
    rescue Exception # rubocop:disable Lint/RescueException
      [500, { "content-type" => "text/plain" }, ["error page"]]
    end)
    assert_equal :keep, responder.respond(req)
    assert_match(/\AHTTP\/1.1 500 .*error page\z/m, req.out.bytes)
    assert_includes @log.string, "request timeout: GET /x was interrupted past soft_timeout (0.1s), " \
                                 "but the app rescued Narwhal::RequestTimeout and answered itself"
    assert_equal 1, @counters.counts[Narwhal::Scoreboard::REQUEST_TIMEOUTS]
    assert_equal 1, @interrupted
  end

  # body.close is the app's code too (a Rack::BodyProxy's blocks): cut
  # there, the response already went out whole.
  def test_a_soft_timeout_in_body_close_is_logged_after_a_whole_response
    req = request
    body = %w[whole]
    body.define_singleton_method(:close) { sleep 10 }
    responder = soft_responder(->(_env) { [200, { "content-length" => "5" }, body] })
    responder.respond(req)
    assert_match(%r{\AHTTP/1.1 200 OK\r\n.*\r\n\r\nwhole\z}m, req.out.bytes)
    line = %r{request timeout: GET /x ran \d\.\d+s, past soft_timeout \(0\.1s\); in body\.close, after the response\n}
    assert_match(/#{line}.*responder_test\.rb:\d+:in `sleep'/m, @log.string)
    assert_equal 1, @interrupted
  end

  def test_quick_requests_under_a_soft_timeout_are_untouched
    responder = soft_responder(->(_env) { [200, {}, ["ok"]] }, seconds: 5)
    3.times do
      req = request
      assert_equal :keep, responder.respond(req)
      assert req.out.bytes.end_with?("ok")
    end
    assert_equal 0, @interrupted
    assert_equal "", @log.string
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
