# frozen_string_literal: true

require "test_helper"
require "logger"
require "stringio"

# The master's loop outlives an exception of its own: logged with its
# backtrace, and the next pass comes after a growing wait, not at once.
class MasterMainLoopTest < Minitest::Test
  # The signal queue as the loop's error path uses it: its waits, noted.
  FakeSignals = Struct.new(:waits) do
    def wait(timeout, _others = [])
      waits << timeout
      nil
    end

    def restore; end
  end

  # A master with only what its loop needs; shutdown: what its own does.
  def master_with(log, signals, shutdown: -> {})
    master = Narwhal::Master.allocate
    master.instance_variable_set(:@logger, Logger.new(log))
    master.instance_variable_set(:@signals, signals)
    master.instance_variable_set(:@failed_passes, 0)
    master.define_singleton_method(:shutdown) { shutdown.call }
    master
  end

  def test_a_pass_that_raises_is_logged_and_the_loop_goes_on_after_a_growing_wait
    log = StringIO.new
    signals = FakeSignals.new([])
    shut = 0
    master = master_with(log, signals, shutdown: -> { shut += 1 })
    passes = [-> { raise NoMethodError, "undefined method `pid' for nil" }, -> { raise "again" }, -> {},
              -> { raise "later" }, -> { 0 }]
    master.define_singleton_method(:pass) { passes.shift.call }
    master.define_singleton_method(:sleep_on_pipe) { signals.waits << :sleep }
    assert_equal 0, master.join, "the exit status of the pass that ended it"
    assert_equal 1, shut, "shut down once, at the end"
    assert_equal [0.5, 1.0, :sleep, 0.5], signals.waits, "a pass that went well resets the wait"
    assert_match(/master loop failed: undefined method `pid' for nil; carrying on in 0\.5s\n.*main_loop_test\.rb/,
                 log.string)
    assert_includes log.string, "master loop failed: again; carrying on in 1s\n"
  end

  # Stopping is not a pass to retry: a shutdown that fails ends the master
  # (with the error) rather than running it again forever.
  def test_a_shutdown_that_raises_ends_the_loop
    signals = FakeSignals.new([])
    master = master_with(StringIO.new, signals, shutdown: -> { raise IOError, "closed stream" })
    master.define_singleton_method(:pass) { 0 }
    master.define_singleton_method(:sleep_on_pipe) { signals.waits << :sleep }
    assert_raises(IOError) { master.join }
    assert_empty signals.waits
  end
end
