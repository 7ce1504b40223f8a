# frozen_string_literal: true

require "test_helper"

# X-Request-Start / X-Queue-Start as the proxies write them, read against a
# fixed clock.
class QueueTimeTest < Minitest::Test
  NOW = 1_700_000_000.5

  def queue(value, header: "HTTP_X_REQUEST_START")
    Narwhal::Responder::QueueTime.seconds({ header => value }, NOW)
  end

  def test_seconds_milliseconds_and_microseconds_with_or_without_t
    assert_in_delta 0.25, queue("t=1700000000.250") # nginx t=${msec}
    assert_in_delta 0.25, queue("1700000000.250")
    assert_in_delta 0.3, queue("t=1700000000200") # HAProxy, Heroku: ms
    assert_in_delta 0.3, queue("1700000000200")
    assert_in_delta 0.000123, queue("t=1700000000499877"), 1e-6 # Apache %t: us
    assert_in_delta 0.5, queue("t=1700000000000000000") # ns
    assert_in_delta 1.5, queue("1699999999") # whole seconds
  end

  def test_x_queue_start_when_x_request_start_is_absent
    assert_in_delta 0.5, queue("t=1700000000000", header: "HTTP_X_QUEUE_START")
    env = { "HTTP_X_REQUEST_START" => "t=1700000000400", "HTTP_X_QUEUE_START" => "t=1700000000000" }
    assert_in_delta 0.1, Narwhal::Responder::QueueTime.seconds(env, NOW)
  end

  def test_a_stamp_slightly_ahead_is_no_wait_and_further_ahead_or_too_old_is_ignored
    assert_equal 0.0, queue("t=1700000001.000") # 0.5 s ahead: clocks apart
    assert_nil queue("t=1700000001.600") # 1.1 s ahead
    assert_nil queue("t=1700000100") # in the future
    assert_in_delta 3599.5, queue("t=1699996401")
    assert_nil queue("t=1699996400") # more than an hour
    assert_nil queue("t=0")
  end

  def test_malformed_values_are_ignored
    ["", "t=", "garbage", "t=abc", "t=1700000000.25s", "1700000000,25", " t=1700000000", "t=-1700000000",
     "t=1e9", "t=1700000000.250, t=1700000000.260", "t=17000000001234567890123", "t=1700000000.", 1_700_000_000]
      .each { |value| assert_nil queue(value), value.inspect }
  end

  def test_nothing_without_the_headers_and_no_allocation
    env = { "PATH_INFO" => "/" }
    assert_nil Narwhal::Responder::QueueTime.seconds(env)
    # (GC.stat itself may count one or two)
    assert_operator allocations { Narwhal::Responder::QueueTime.seconds(env) }, :<, 10
  end

  # Objects allocated by 1,000 runs of the block.
  def allocations
    yield
    before = GC.stat(:total_allocated_objects)
    i = 0
    while i < 1000
      yield
      i += 1
    end
    GC.stat(:total_allocated_objects) - before
  end

  def test_against_the_real_clock
    stamp = format("t=%.3f", Process.clock_gettime(Process::CLOCK_REALTIME) - 2)
    assert_in_delta 2.0, Narwhal::Responder::QueueTime.seconds({ "HTTP_X_REQUEST_START" => stamp }), 0.5
  end

  # What #measure reads of a request, and what it tells the scoreboard.
  FakeRequest = Struct.new(:queue_stamp?, :waited)
  class Histograms
    attr_reader :seen

    def initialize
      @seen = []
    end

    def queue_time(seconds, kind)
      @seen << [kind, seconds]
    end
  end

  def measure(env, waited:, trust: true)
    @histograms = Histograms.new
    clock = Narwhal::Responder::QueueTime.new(@histograms, trust_header: trust)
    clock.measure(FakeRequest.new(env.key?("HTTP_X_REQUEST_START"), waited), env)
  end

  def realtime
    Process.clock_gettime(Process::CLOCK_REALTIME)
  end

  def test_the_kernels_figure_without_a_header
    env = {}
    seconds = measure(env, waited: 0.3)
    assert_equal 0.3, seconds
    assert_equal seconds, env["narwhal.queue_time"]
    assert_equal [[Narwhal::Scoreboard::QUEUE_TIME_KERNEL, seconds]], @histograms.seen
  end

  def test_a_trusted_header_wins_and_an_untrusted_or_unusable_one_gives_way
    stamp = format("t=%.3f", realtime - 2)
    assert_in_delta 2.0, measure({ "HTTP_X_REQUEST_START" => stamp }, waited: 0.001), 0.5
    assert_equal Narwhal::Scoreboard::QUEUE_TIME_HEADER, @histograms.seen.first.first
    assert_equal 0.001, measure({ "HTTP_X_REQUEST_START" => stamp }, waited: 0.001, trust: false)
    assert_equal Narwhal::Scoreboard::QUEUE_TIME_KERNEL, @histograms.seen.first.first
    assert_equal 0.001, measure({ "HTTP_X_REQUEST_START" => "soon" }, waited: 0.001)
    assert_equal Narwhal::Scoreboard::QUEUE_TIME_KERNEL, @histograms.seen.first.first
  end

  def test_no_figure_without_a_stamp
    env = {}
    assert_nil measure(env, waited: nil), "a Unix socket's request without a header"
    assert_empty env
    assert_empty @histograms.seen
  end
end
