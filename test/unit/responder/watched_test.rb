# frozen_string_literal: true

require "test_helper"
require "support/fake_out"
require "support/fake_counters"
require "logger"

# Narwhal::Responder::Watched: a responder under soft_timeout, with a real watchdog over a real scoreboard slot.
class ResponderWatchedTest < Minitest::Test
  FakeOut = Narwhal::FakeOut # collects what would go to the socket

  TEMPLATE = { "SCRIPT_NAME" => "" }.freeze

  def setup
    @log = StringIO.new
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
    assert_match(/#{line}.*watched_test\.rb:\d+:in `sleep'/, @log.string)
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
    assert_match(/#{line}.*watched_test\.rb:\d+:in `sleep'/m, @log.string)
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
end
