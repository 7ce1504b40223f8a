# frozen_string_literal: true

require "test_helper"
require "support/worker_monitor_cases"

# The master's policies over the scoreboard: which workers must go, with
# which signal, and the line the log gets.
class WorkerMonitorTest < Minitest::Test
  include Narwhal::WorkerMonitorCases

  # busy: { nr => seconds on the current request }; one thread per worker
  FakeScoreboard = Struct.new(:busy) do
    def busy_for(nr)
      busy[nr]
    end

    def snapshot(nr)
      Narwhal::Scoreboard::Snapshot.new(nr: nr, busy_threads: busy[nr] ? 1 : 0, requests_in_flight: [])
    end

    # nameless requests: no thread to ask for a backtrace (tid 0)
    def requests_in_flight(nr)
      return [] unless busy[nr]

      [Narwhal::Scoreboard::CurrentRequest.new(0, busy[nr], "", "", -1, false, 0, 0)]
    end
  end

  def test_a_worker_busy_past_the_timeout_is_killed_idle_and_quick_ones_are_not
    board = FakeScoreboard.new({ 1 => 2.34567, 2 => 0.5 }) # 0 is idle
    monitor = Monitor.new(board, [Monitor::Timeout.new(1, @logger)], @logger)
    assert_equal [[1, :KILL]], verdicts(monitor, workers(3))
    assert_equal "worker=1 pid=101 timeout (2.346s > 1s), killing; no other request in flight\n", @log.string
  end

  # With request threads the kill ends every request the worker has: the
  # line counts those of the other threads, read before the kill.
  def test_the_kill_line_counts_the_other_requests_that_die_with_the_worker
    board = Narwhal::Scoreboard.new(3, threads: 4)
    [[1, 0], [1, 2], [1, 3], [2, 1]].each { |nr, i| board.thread_slot(nr, i).request_started }
    monitor = Monitor.new(board, [Monitor::Timeout.new(0.05, @logger)], @logger)
    wait_until(message: "requests past the timeout") { board.busy_for(1).to_f > 0.05 && board.busy_for(2).to_f > 0.05 }
    board.thread_slot(1, 3).request_finished # done before the check: not in flight
    assert_equal [[1, :KILL], [2, :KILL]], verdicts(monitor, workers(3))
    assert_match(/^worker=1 pid=101 timeout \(\d+\.\d+s > 0\.05s\), killing; 1 other request in flight dies with it$/,
                 @log.string)
    assert_match(/^worker=2 pid=102 timeout \(\d+\.\d+s > 0\.05s\), killing; no other request in flight$/, @log.string)

    board.thread_slot(0, 0).request_started
    board.thread_slot(0, 1).request_started
    board.thread_slot(0, 2).request_started
    wait_until(message: "worker 0 past the timeout") { board.busy_for(0).to_f > 0.05 }
    verdicts(monitor, workers(1))
    assert_match(/^worker=0 pid=100 timeout \(.*\), killing; 2 other requests in flight die with it$/, @log.string)
  end

  # A second policy (memory next) slots in beside the timeout: the first
  # one a worker breaches decides, and a worker is handed back once.
  def test_policies_are_asked_in_order_and_one_verdict_per_worker
    retire = Object.new
    def retire.signal = :QUIT
    def retire.interval = 5.0
    def retire.due?(_now) = true
    def retire.breach(worker, _board) = ("memory 600 MB > 512 MB, retiring" if worker.nr.even?)
    board = FakeScoreboard.new({ 0 => 9.0, 1 => 9.0 })
    monitor = Monitor.new(board, [Monitor::Timeout.new(3, @logger), retire], @logger)
    assert_equal [[0, :KILL], [1, :KILL], [2, :QUIT]], verdicts(monitor, workers(3))
    assert_includes @log.string, "worker=2 pid=102 memory 600 MB > 512 MB, retiring\n"
    assert_equal 1.5, monitor.interval, "the master looks twice per timeout"
  end

  # The line and the hook name the request the worker was stuck on, read
  # from the scoreboard the worker wrote when the request started.
  def test_the_kill_names_the_request_and_the_hook_gets_the_same
    board = Narwhal::Scoreboard.new(2, threads: 2)
    board.thread_slot(1, 1).request_started("POST", "/reports/generate")
    board.thread_slot(1, 0).request_started("GET", "/later")
    config = Narwhal::Configurator.new
    config.settings[:logger] = @logger
    config.settings[:timeout] = 0.05
    seen = []
    config.settings[:after_worker_timeout] = ->(server, worker, info) { seen << [server, worker.nr, info] }
    server = Struct.new(:tally).new(Narwhal::Master::Tally.new)
    monitor = Monitor.for(config, board, server)
    wait_until(message: "a request past the timeout") { board.busy_for(1).to_f > 0.05 }
    assert_equal [[1, :KILL]], verdicts(monitor, workers(2))
    assert_match(%r{^worker=1 pid=101 timeout \(0\.\d+s > 0\.05s\) on POST /reports/generate, killing; 1 other request in flight dies with it$},
                 @log.string)
    assert_equal 1, seen.size
    hook_server, nr, info = seen.first
    assert_same server, hook_server
    assert_equal 1, nr
    assert_equal ["POST", "/reports/generate", 0.05, 1], [info.request_method, info.path, info.timeout, info.other_requests]
    assert_operator info.elapsed, :>, 0.05
    assert_equal 1, server.tally[:timeout_kills]
  end

  def test_a_hook_that_raises_is_logged_and_the_kill_still_counts
    board = FakeScoreboard.new({ 0 => 9.0 })
    server = Struct.new(:tally).new(Narwhal::Master::Tally.new)
    monitor = Monitor.new(board, [Monitor::Timeout.new(3, @logger)], @logger, server: server,
                                                                    on_timeout: ->(*) { raise "pager down" })
    assert_equal [[0, :KILL]], verdicts(monitor, workers(1))
    assert_includes @log.string, "worker=0 pid=100 timeout (9.0s > 3s), killing; no other request in flight\n"
    assert_match(/after_worker_timeout failed: .*pager down/, @log.string)
    assert_equal 1, server.tally[:timeout_kills]
  end

  # SIGKILL is not instant: a pass that comes before the worker is reaped
  # sees it still past its timeout. It was killed already: no second line,
  # hook call, count or signal.
  def test_a_killed_worker_seen_again_before_it_is_reaped_is_killed_logged_hooked_and_counted_once
    board = FakeScoreboard.new({ 0 => 9.0, 1 => 9.0 })
    server = Struct.new(:tally).new(Narwhal::Master::Tally.new)
    hooked = []
    monitor = Monitor.new(board, [Monitor::Timeout.new(3, @logger)], @logger, server: server,
                                                                    on_timeout: ->(_s, worker, _i) { hooked << worker.pid })
    list = workers(2)
    assert_equal [[0, :KILL], [1, :KILL]], verdicts(monitor, list)
    assert_empty verdicts(monitor, list), "the next pass, neither reaped yet"
    assert_empty verdicts(monitor, [list[1]]), "worker 0 reaped, worker 1 not yet"
    assert_equal 2, @log.string.scan("killing").size
    assert_equal [100, 101], hooked
    assert_equal 2, server.tally[:timeout_kills]
    assert_equal [[0, :KILL]], verdicts(monitor, workers(1)), "a new worker with the same number is judged anew"
  end

  def test_the_interval_follows_the_configured_timeout
    config = Narwhal::Configurator.new
    config.settings[:timeout] = 30
    assert_equal 15.0, Monitor.for(config, FakeScoreboard.new({})).interval
  end

  def test_the_configuration_asks_for_the_policies
    config = Narwhal::Configurator.new
    assert_equal [Monitor::Timeout], Monitor.for(config, nil).instance_variable_get(:@policies).map(&:class)
    config.settings.update(worker_memory_limit: 1 << 30, worker_max_requests: 1000)
    assert_equal [Monitor::Timeout, Monitor::MemoryLimit, Monitor::RequestLimit],
                 Monitor.for(config, nil).instance_variable_get(:@policies).map(&:class)
  end
end
