# frozen_string_literal: true

require "test_helper"
require "logger"
require "stringio"

# The master's policies over the scoreboard: which workers must go, with
# which signal, and the line the log gets.
class WorkerMonitorTest < Minitest::Test
  Monitor = Narwhal::Master::WorkerMonitor

  # busy: { nr => seconds on the current request }
  FakeScoreboard = Struct.new(:busy) do
    def busy_for(nr)
      busy[nr]
    end
  end

  def setup
    @log = StringIO.new
    @logger = Logger.new(@log)
    @logger.formatter = ->(_severity, _time, _prog, message) { "#{message}\n" }
  end

  def workers(count)
    Array.new(count) { |nr| Narwhal::Worker.new(nr).tap { |w| w.pid = 100 + nr } }
  end

  def verdicts(monitor, list)
    found = []
    monitor.check(list) { |worker, sig| found << [worker.nr, sig] }
    found
  end

  def test_a_worker_busy_past_the_timeout_is_killed_idle_and_quick_ones_are_not
    board = FakeScoreboard.new({ 1 => 2.34567, 2 => 0.5 }) # 0 is idle
    monitor = Monitor.new(board, [Monitor::Timeout.new(1)], @logger)
    assert_equal [[1, :KILL]], verdicts(monitor, workers(3))
    assert_equal "worker=1 pid=101 timeout (2.346s > 1s), killing\n", @log.string
  end

  # A second policy (memory next) slots in beside the timeout: the first
  # one a worker breaches decides, and a worker is handed back once.
  def test_policies_are_asked_in_order_and_one_verdict_per_worker
    retire = Object.new
    def retire.signal = :QUIT
    def retire.interval = 5.0
    def retire.breach(worker, _board) = ("memory 600 MB > 512 MB, retiring" if worker.nr.even?)
    board = FakeScoreboard.new({ 0 => 9.0, 1 => 9.0 })
    monitor = Monitor.new(board, [Monitor::Timeout.new(3), retire], @logger)
    assert_equal [[0, :KILL], [1, :KILL], [2, :QUIT]], verdicts(monitor, workers(3))
    assert_includes @log.string, "worker=2 pid=102 memory 600 MB > 512 MB, retiring\n"
    assert_equal 1.5, monitor.interval, "the master looks twice per timeout"
  end

  def test_the_interval_follows_the_configured_timeout
    config = Narwhal::Configurator.new
    config.settings[:timeout] = 30
    assert_equal 15.0, Monitor.for(config, FakeScoreboard.new({})).interval
  end
end
