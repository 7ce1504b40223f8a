# frozen_string_literal: true

require "test_helper"
require "logger"

# The timeout policy on a forked child standing for a worker: within the
# timeout nothing; past it, the request's thread is asked for its
# backtrace, which is in the child's stderr before the breach is answered,
# and the breach names the request.
class MasterWorkerMonitorTimeoutTest < Minitest::Test
  Worker = Struct.new(:nr, :pid)
  Timeout = Narwhal::Master::WorkerMonitor::Timeout

  def setup
    @board = Narwhal::Scoreboard.new(1)
    @log = StringIO.new
    @err = Tempfile.new("stderr")
  end

  def teardown
    if @child
      Process.kill(:KILL, @child)
      Process.wait(@child)
    end
    @err.close!
  end

  def looping_forever = loop { sleep 1 }

  def test_past_the_timeout_the_backtrace_comes_first_then_the_breach
    @child = fork do
      $stderr.reopen(@err.path, "a")
      slot = @board.thread_slot(0)
      slot.bind_thread!
      Narwhal::BacktraceSignal.install
      slot.request_started("POST", "/reports", -1)
      looping_forever
    end
    worker = Worker.new(0, @child)
    wait_until(message: "the child's request") { @board.busy_for(0) }
    policy = Timeout.new(0.2, Logger.new(@log))
    assert_nil policy.breach(worker, @board) if @board.busy_for(0) < 0.2
    wait_until(message: "the request past its timeout") { @board.busy_for(0) > 0.2 }
    info = policy.breach(worker, @board)
    assert_equal ["POST", "/reports", 0], [info.request_method, info.path, info.other_requests]
    assert_match(%r{worker=0 pid=#{@child} POST /reports has run \d\.\d+s, past timeout \(0\.2s\); where it is \(tid=\d+\):},
                 @log.string)
    assert_match(/timeout_test\.rb:\d+:in `looping_forever'/, File.read(@err.path), "written before the breach returned")
    assert_equal 0.1, policy.interval
  end
end
