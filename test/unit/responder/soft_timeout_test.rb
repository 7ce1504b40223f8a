# frozen_string_literal: true

require "test_helper"
require "logger"

# The soft_timeout watchdog over real scoreboard slots and real threads:
# who gets Narwhal::RequestTimeout, when, how often, and where it may land.
class SoftTimeoutTest < Minitest::Test
  SoftTimeout = Narwhal::Responder::SoftTimeout
  RequestTimeout = Narwhal::RequestTimeout

  def setup
    @board = Narwhal::Scoreboard.new(1, threads: 4)
    @log = StringIO.new
    @soft = nil
  end

  def teardown
    @soft&.stop
  end

  def watchdog(seconds)
    @soft = SoftTimeout.new(seconds, Logger.new(@log))
  end

  # One request on the calling thread as a Responder runs it: the slot
  # marks and the deferred parts are narwhal's, the block is the app's.
  def request(watch, slot, before: nil, after: nil)
    watch.serve do
      slot.request_started
      begin
        before&.call
        result = watch.interruptible { yield }
        after&.call
        result
      ensure
        slot.request_finished
      end
    end
  end

  def wait_for_the_raise
    wait_until(timeout: 10, message: "the watchdog's raise") { Thread.pending_interrupt? }
  end

  def test_no_thread_until_started_and_none_after_stop
    before = Thread.list.size
    soft = watchdog(1)
    soft.watch(Thread.current, @board.thread_slot(0, 0))
    assert_equal before, Thread.list.size, "registering starts nothing"
    soft.start
    assert_equal before + 1, Thread.list.size
    assert_equal "soft_timeout", (Thread.list - [Thread.current]).map(&:name).last
    soft.stop
    assert_equal before, Thread.list.size
  end

  def test_the_interval_is_a_quarter_of_the_limit_at_most_a_tenth_of_a_second
    assert_equal 0.05, SoftTimeout.new(0.2, nil).interval
    assert_equal 0.1, SoftTimeout.new(15, nil).interval
  end

  def test_a_request_past_the_limit_is_interrupted_once_and_its_ensure_runs
    soft = watchdog(0.2)
    slot = @board.thread_slot(0, 1)
    events = Queue.new
    app = Thread.new do
      watch = soft.watch(Thread.current, slot)
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      begin
        request(watch, slot) do
          sleep 10
        ensure
          events << :ensure_ran
        end
      rescue RequestTimeout => e
        events << [e.message, Process.clock_gettime(Process::CLOCK_MONOTONIC) - started]
      end
      events << watch.interrupted?
    end
    soft.start
    assert app.join(10), "the sleeping request was not interrupted"
    assert_equal :ensure_ran, events.pop
    message, elapsed = events.pop
    assert_match(/\Arequest ran 0\.[2-9]\d*s, past soft_timeout \(0\.2s\)\z/, message)
    assert_operator elapsed, :>=, 0.2
    assert_operator elapsed, :<, 5
    assert_equal true, events.pop
    assert_nil slot.busy_for, "the slot is idle again"
  end

  # An app that rescues Exception and carries on is not raised into again;
  # its next request is watched afresh.
  def test_at_most_once_per_request
    soft = watchdog(0.1)
    slot = @board.thread_slot(0, 0)
    watch = soft.watch(Thread.current, slot)
    soft.start
    raised = 0
    request(watch, slot) do
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 0.6
      while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
        begin
          sleep 0.01
        rescue RequestTimeout
          raised += 1
        end
      end
    end
    assert_equal 1, raised
    assert watch.interrupted?, "the app took it, even though it rescued it"
    assert_raises(RequestTimeout) { request(watch, slot) { sleep 10 } }
  end

  # Raised while narwhal's own code runs, it waits for the app code that
  # follows in the same request.
  def test_a_raise_during_deferred_code_lands_in_the_app_code_that_follows
    soft = watchdog(0.05)
    slot = @board.thread_slot(0, 0)
    watch = soft.watch(Thread.current, slot)
    soft.start
    steps = []
    app_line = __LINE__ + 5
    error = assert_raises(RequestTimeout) do
      request(watch, slot, before: lambda {
        wait_for_the_raise
        steps << :deferred_code_finished
      }) { steps << :app_started }
    end
    assert_equal %i[deferred_code_finished app_started], steps
    assert_match(/#{File.basename(__FILE__)}:#{app_line}:in `block/, error.backtrace.first, "raised in the app's code")
    assert watch.interrupted?
  end

  # If the request ends in narwhal's code, the raise is dropped: nothing
  # was interrupted, and the next request is not hit by it.
  def test_a_raise_after_the_app_code_is_dropped_when_the_request_ends
    soft = watchdog(0.05)
    slot = @board.thread_slot(0, 0)
    watch = soft.watch(Thread.current, slot)
    soft.start
    finished = false
    result = request(watch, slot, after: lambda {
      wait_for_the_raise
      finished = true
    }) { :quick_app }
    assert_equal :quick_app, result
    assert finished, "the deferred code ran to its end"
    refute watch.interrupted?
    refute Thread.pending_interrupt?, "nothing left for the next request"
    soft.stop
    assert_equal :next, request(watch, slot) { :next }
  end

  # Registered for one thread, served on another (a server built on one
  # thread, run on another): the serving thread is the one interrupted.
  def test_the_thread_that_serves_is_the_one_interrupted
    soft = watchdog(0.1)
    slot = @board.thread_slot(0, 0)
    bystander = Thread.new { sleep 10 }
    watch = soft.watch(bystander, slot)
    soft.start
    assert_raises(RequestTimeout) { request(watch, slot) { sleep 10 } }
    assert bystander.alive?, "the registered thread was left alone"
  ensure
    bystander&.kill&.join
  end

  # The watchdog's own check, called directly: idle slots and requests
  # under the limit are left alone.
  def test_idle_threads_and_requests_under_the_limit_are_left_alone
    slot = @board.thread_slot(0, 2)
    watch = SoftTimeout.new(5, nil).watch(Thread.current, slot)
    watch.check
    refute Thread.pending_interrupt?
    watch.serve do
      slot.request_started
      watch.check
      slot.request_finished
    end
    refute watch.interrupted?
    refute Thread.pending_interrupt?
  end

  # The writer the response code gets: the connection's, with every call
  # passed on (what a writer may learn later included), and a note of
  # whether bytes may have gone out.
  class RecordingOut
    attr_reader :written, :io

    def initialize
      @written = +""
      @io = :socket
    end

    def write(str) = @written << str
    def write_file(_file, length) = length
    def finish_later(limit, mode: nil) = [limit, mode, Thread.pending_interrupt?]
  end

  def test_the_deferred_writer_passes_calls_on_and_notes_a_sent_byte
    slot = @board.thread_slot(0, 3)
    watch = SoftTimeout.new(5, nil).watch(Thread.current, slot)
    out = RecordingOut.new
    watch.serve do
      writer = watch.writer(out)
      refute watch.response_started?
      writer.write("head")
      assert watch.response_started?
      assert_equal 7, writer.write_file(nil, 7)
      assert_equal [10, :spool, false], writer.finish_later(10, mode: :spool)
      assert_equal :socket, writer.io
      assert writer.respond_to?(:finish_later)
      refute writer.respond_to?(:no_such_method)
    end
    assert_equal "head", out.written
    watch.serve { refute watch.response_started?, "each request starts unsent" }
  end

  def test_only_the_slow_threads_of_several_are_interrupted
    soft = watchdog(0.2)
    results = Queue.new
    threads = Array.new(4) do |i|
      Thread.new do
        slot = @board.thread_slot(0, i)
        watch = soft.watch(Thread.current, slot)
        begin
          # threads 0 and 2 hang; 1 and 3 serve quick requests for a second
          if i.even?
            request(watch, slot) { sleep 10 }
          else
            20.times { request(watch, slot) { sleep 0.05 } }
          end
          results << [i, :done]
        rescue RequestTimeout
          results << [i, :interrupted]
        end
      end
    end
    soft.start
    threads.each { |t| assert t.join(10), "thread still running" }
    assert_equal [[0, :interrupted], [1, :done], [2, :interrupted], [3, :done]], Array.new(4) { results.pop }.sort
  end
end
