# frozen_string_literal: true

require "test_helper"
require "support/worker_monitor_cases"

# worker_max_requests as the monitor applies it: each worker's own limit
# within the jitter, and the recycle line.
class MasterWorkerMonitorRequestLimitTest < Minitest::Test
  include Narwhal::WorkerMonitorCases

  def test_each_worker_has_its_own_request_limit_within_the_jitter
    limit = Monitor::RequestLimit.new(100, 20)
    limits = (1000...1100).map { |pid| limit.limit_for(pid) }
    assert limits.all? { |n| n.between?(100, 120) }
    assert_operator limits.uniq.size, :>, 10, "spread, so workers do not retire together"
    assert_equal limits, (1000...1100).map { |pid| limit.limit_for(pid) }, "the same on every pass"
    assert_equal [100], (1..50).map { |pid| Monitor::RequestLimit.new(100, 0).limit_for(pid) }.uniq

    list = workers(2)
    own = limit.limit_for(list[1].pid)
    board = CountingBoard.new({ 0 => own - 1, 1 => own })
    board.served[0] = limit.limit_for(list[0].pid) - 1
    monitor = Monitor.new(board, [limit], @logger)
    assert_equal [[1, :QUIT]], verdicts(monitor, list)
    assert_equal "worker=1 pid=101 served #{own} requests, worker_max_requests #{own} (100 + jitter #{own - 100}), " \
                 "recycling\n", @log.string
  end

  # The count is the scoreboard's, every thread's together; the limit is
  # reached at its number, not before.
  def test_the_limit_counts_the_requests_of_every_thread
    board = Narwhal::Scoreboard.new(1, threads: 2)
    worker = Narwhal::Worker.new(0).tap { |w| w.pid = 4242 }
    limit = Monitor::RequestLimit.new(3, 0)
    serve = ->(thread) { board.thread_slot(0, thread).tap { |s| s.request_started("GET", "/") }.request_finished }
    serve.call(0)
    serve.call(1)
    assert_nil limit.breach(worker, board)
    serve.call(1)
    assert_equal "served 3 requests, worker_max_requests 3 (3 + jitter 0), recycling", limit.breach(worker, board)
    assert_equal [:QUIT, :request_recycles, Narwhal::Master::MAX_SLEEP], [limit.signal, limit.event, limit.interval]
    assert limit.due?(0)
  end
end
