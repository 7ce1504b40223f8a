# frozen_string_literal: true

require "test_helper"
require "logger"
require_relative "../../support/fake_counters"

# The 503 a request that waited past queue_deadline gets: its bytes, its
# count, and a log that says how many without a line for each.
class ResponderShedderTest < Minitest::Test
  FakeRequest = Struct.new(:env, :out, :head?)
  Out = Struct.new(:written) do
    def write(bytes)
      written << bytes
    end
  end

  def setup
    @log = StringIO.new
    @counters = FakeCounters.new
    @shedder = Narwhal::Responder::Shedder.new(Logger.new(@log), @counters, deadline: 0.5, retry_after: 3)
  end

  def request(path = "/a", head: false)
    env = { "REQUEST_METHOD" => head ? "HEAD" : "GET", "PATH_INFO" => path }
    FakeRequest.new(env, Out.new([]), head)
  end

  def test_late_is_past_the_deadline_and_unknown_is_never_late
    refute @shedder.late?(nil)
    refute @shedder.late?(0.5)
    assert @shedder.late?(0.5001)
  end

  def test_the_answer_is_a_503_that_closes_and_says_when_to_retry
    r = request
    assert_equal :close, @shedder.answer(r, 0.7)
    bytes = r.out.written.join
    assert_match(%r{\AHTTP/1.1 503 Service Unavailable\r\n}, bytes)
    assert_includes bytes, "retry-after: 3\r\n"
    assert_includes bytes, "connection: close\r\n"
    assert bytes.end_with?("\r\n\r\nService Unavailable\n")
    head = request(head: true)
    @shedder.answer(head, 0.7)
    assert head.out.written.join.end_with?("\r\n\r\n"), "no body for HEAD"
    assert_equal 2, @counters.counts[Narwhal::Scoreboard::REQUESTS_SHED_QUEUE]
  end

  def test_one_log_line_per_interval_with_the_count_since_the_last
    @shedder.answer(request("/first"), 0.612)
    5.times { @shedder.answer(request("/more"), 0.9) }
    lines = @log.string.lines
    assert_equal 1, lines.size, "the others wait for the next interval"
    assert_match(%r{shed 1 request\(s\) past queue_deadline 0.5s with 503, the last GET /first after 0\.612s}, lines[0])
  end

  def test_a_client_gone_costs_nothing_but_the_count
    r = request
    def (r.out).write(_) = raise(Narwhal::ClientGone, "gone")
    assert_equal :close, @shedder.answer(r, 1.0)
    assert_equal 1, @counters.counts[Narwhal::Scoreboard::REQUESTS_SHED_QUEUE]
  end
end
