# frozen_string_literal: true

require "test_helper"
require "support/worker_monitor_cases"

# worker_memory_limit as the monitor applies it: RSS or PSS over the limit
# retires a worker once, read once per interval, never before its first
# request.
class MasterWorkerMonitorMemoryLimitTest < Minitest::Test
  include Narwhal::WorkerMonitorCases

  def test_a_worker_over_the_memory_limit_is_retired_once_rss_or_pss_and_not_before_its_first_request
    memory = Object.new
    def memory.rss(pid) = { 100 => 600 << 20, 101 => 400 << 20, 102 => 700 << 20 }[pid]
    def memory.pss(pid) = rss(pid) / 2
    board = CountingBoard.new({ 0 => 5, 1 => 5 }) # 2 has served nothing yet
    limit = Monitor::MemoryLimit.new(512 << 20, interval: 5, memory: memory)
    monitor = Monitor.new(board, [Monitor::Timeout.new(30, @logger), limit], @logger)
    list = workers(3)
    assert_equal [[0, :QUIT]], verdicts(monitor, list)
    assert_equal "worker=0 pid=100 memory 600.0 MiB (RSS) > worker_memory_limit 512.0 MiB, recycling\n", @log.string
    assert_equal 5, monitor.interval

    list[0].recycling = true
    limit.instance_variable_set(:@next_at, nil)
    assert_empty verdicts(monitor, list), "a worker being replaced is not retired again"
    assert_empty verdicts(monitor, workers(3)), "memory is read once per interval"

    pss = Monitor::MemoryLimit.new(256 << 20, pss: true, memory: memory)
    assert_equal [[0, :QUIT]], verdicts(Monitor.new(board, [pss], @logger), workers(2))
    assert_includes @log.string, "worker=0 pid=100 memory 300.0 MiB (PSS) > worker_memory_limit 256.0 MiB"
  end

  def test_a_gone_process_has_no_memory_to_judge
    limit = Monitor::MemoryLimit.new(1 << 20)
    gone = Narwhal::Worker.new(0).tap { |w| w.pid = 2**22 + 1 } # above pid_max's default
    assert_nil limit.breach(gone, CountingBoard.new({ 0 => 1 }))
  end

  # This process, read from /proc, against a limit it is surely over, once
  # the scoreboard says it served a request.
  def test_a_real_process_over_the_limit_is_named_with_its_size
    board = Narwhal::Scoreboard.new(1)
    me = Narwhal::Worker.new(0).tap { |w| w.pid = Process.pid }
    limit = Monitor::MemoryLimit.new(1 << 20)
    assert_nil limit.breach(me, board), "no request served yet"
    board.thread_slot(0).tap { |slot| slot.request_started("GET", "/") }.request_finished
    assert_match(/\Amemory \d+\.\d (MiB|GiB) \(RSS\) > worker_memory_limit 1\.0 MiB, recycling\z/,
                 limit.breach(me, board))
    assert_equal [:QUIT, :memory_recycles], [limit.signal, limit.event]
  end

  def test_memory_is_due_once_per_interval_and_at_once_the_first_time
    limit = Monitor::MemoryLimit.new(1 << 30, interval: 5)
    assert_equal [true, false, false, true, false], [100.0, 101.0, 104.9, 105.0, 109.0].map { |now| limit.due?(now) }
    assert_equal 5, limit.interval
  end
end
