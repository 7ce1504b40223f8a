# frozen_string_literal: true

require "test_helper"

# The self-pipe signal queue, with real signals sent to this process (Ruby
# runs the handler of a signal a process sends itself before kill returns).
class SignalQueueTest < Minitest::Test
  def setup
    @queue = Narwhal::System::SignalQueue.new
    @saved = %w[USR1 USR2 HUP CHLD].to_h { |name| [name, trap(name, "DEFAULT")] }
  end

  def teardown
    @queue.restore
    @saved.each { |name, handler| trap(name, handler) }
  end

  def readable?(timeout = 5)
    !IO.select([@queue.reader], nil, nil, timeout).nil?
  end

  def test_signals_come_out_in_the_order_they_came_and_wake_the_reader
    @queue.queue("USR2", "USR1", "HUP")
    refute readable?(0), "nothing to wake for yet"
    %i[USR2 HUP USR1 USR2].each { |sig| Process.kill(sig, Process.pid) }
    assert readable?
    @queue.clear_wakeups
    refute readable?(0), "the wake-ups are cleared"
    assert_equal %w[USR2 HUP USR1 USR2], Array.new(4) { @queue.pop }
    assert_nil @queue.pop
  end

  # An app thread hands an event to the loop: queued in order with the
  # signals, and the reader wakes.
  def test_an_event_pushed_from_another_thread_wakes_the_reader
    @queue.queue("USR1")
    Process.kill(:USR1, Process.pid)
    Thread.new { @queue.push(:retire) }.join
    @queue.clear_wakeups
    assert_equal ["USR1", :retire], Array.new(2) { @queue.pop }
    Thread.new { @queue.push(:retire) }.join
    assert readable?, "a push alone wakes the loop"
    assert_equal :retire, @queue.pop
  end

  def test_wait_returns_the_readable_ios_and_clears_the_wakeups
    @queue.queue("USR1")
    other_r, other_w = IO.pipe
    assert_nil @queue.wait(0.01, [other_r])
    Process.kill(:USR1, Process.pid)
    assert_equal [@queue.reader], @queue.wait(5, [other_r])
    other_w.write("x")
    assert_equal [other_r], @queue.wait(5, [other_r]), "the signal's wake-up was cleared"
    assert_equal "USR1", @queue.pop
  ensure
    [other_r, other_w].each { |io| io&.close }
  end

  # The master's CHLD: a child's exit wakes the loop, nothing is queued.
  def test_a_wake_only_signal_wakes_without_queueing
    @queue.wake_on("CHLD")
    pid = fork { exit!(0) }
    assert readable?, "the child's exit woke the reader"
    assert_nil @queue.pop
  ensure
    Process.wait(pid) if pid
  end

  def test_a_handled_signal_runs_its_block_at_once
    ran = []
    @queue.handle("USR1", "USR2") { |signo| ran << signo }
    Process.kill(:USR1, Process.pid)
    Process.kill(:USR2, Process.pid)
    assert_equal [Signal.list["USR1"], Signal.list["USR2"]], ran
    refute readable?(0)
    assert_nil @queue.pop
  end

  # Trapped twice (queued, then handled at once): the handler put back is
  # the one from before the first trap, not the first trap's own.
  def test_restore_puts_back_the_handlers_found_before_the_first_trap
    own = proc {}
    trap("USR1", own)
    trap("USR2", "IGNORE")
    @queue.queue("USR1", "USR2", "HUP")
    @queue.handle("USR1") { nil }
    @queue.restore
    assert_same own, trap("USR1", "DEFAULT")
    assert_equal "IGNORE", trap("USR2", "DEFAULT")
    assert_equal "DEFAULT", trap("HUP", "DEFAULT")
    assert @queue.reader.closed?
    @queue.wake # a handler that fires after restore must not raise
  end

  # In a forked worker: defaults back, some signals ignored until the
  # worker's own handlers are in place, the parent's pipe closed.
  def test_reset_in_child_gives_defaults_ignores_and_closes_the_pipe
    @queue.queue("USR1", "HUP")
    @queue.wake_on("CHLD")
    report_r, report_w = IO.pipe
    pid = fork do
      @queue.reset_in_child(ignore: %w[USR1])
      handlers = %w[USR1 HUP CHLD].map { |name| trap(name, "DEFAULT") }
      report_w.write([*handlers, @queue.reader.closed?].join(" "))
      exit!(0)
    end
    report_w.close
    assert_equal "IGNORE DEFAULT DEFAULT true", report_r.read
    Process.wait(pid)
    refute @queue.reader.closed?, "the parent's pipe stays open"
  ensure
    [report_r, report_w].each { |io| io&.close unless io&.closed? }
  end
end
