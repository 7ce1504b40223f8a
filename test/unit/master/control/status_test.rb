# frozen_string_literal: true

require "test_helper"
require "json"

# What /status, /metrics and /ready are made of, read from a real
# scoreboard, the master's tables and the kernel's listen queue: each
# worker's state and request, readiness, and JSON as it is.
class MasterControlStatusTest < Minitest::Test
  Status = Narwhal::Master::Control::Status

  # The master as Status reads it.
  class Master
    attr_accessor :config, :tally, :listeners, :worker_processes, :draining, :handing_over, :successor_serving

    def draining? = draining
    def handing_over? = handing_over
    def successor_serving? = successor_serving
  end

  # The WorkerTable as Status reads it.
  Workers = Struct.new(:snapshot, :ever_ready, :boot_failures) do
    def ever_ready? = ever_ready
  end

  def setup
    @board = Narwhal::Scoreboard.new(4, threads: 2)
    @listener = Narwhal::Listener.new("127.0.0.1:0", backlog: 16, tcp_defer_accept: false)
    @clients = []
    @master = Master.new
    @master.config = Narwhal::Configurator.new.tap { |c| c.settings[:threads] = 2 }
    @master.tally = Narwhal::Master::Tally.new
    @master.listeners = [@listener]
    @master.worker_processes = 3
    @master.draining = false
    @master.handing_over = false
    @master.successor_serving = false
    @workers = Array.new(4) { |nr| Narwhal::Worker.new(nr).tap { |w| w.pid = 100 + nr } }
  end

  def teardown
    @clients.each(&:close)
    @listener.close
  end

  # Worker 0 busy, 1 idle, 2 told to QUIT, 3 forked but not serving yet.
  def serve
    [0, 1, 2].each do |nr|
      @board.reset(nr, 100 + nr)
      @board.worker_slot(nr).serving = true
    end
    @board.reset(3, 103)
    @workers[2].quitting = true
    @board.thread_slot(0, 1).request_started("POST", "/password/reset/s3cret")
  end

  def status(paths: false)
    rss = ->(pid) { pid == 100 ? 52_428_800 : nil }
    Status.new(@master, @board, Workers.new(@workers.reverse, true, 0), rss: rss, paths: paths).to_h
  end

  def test_each_worker_in_its_state_with_its_oldest_request
    serve
    @master.tally.count(:respawns)
    s = status
    assert_equal [Process.pid, true, false, 3, 2],
                 s.values_at("pid", "ready", "draining", "worker_processes", "threads")
    assert_equal %w[busy idle quitting booting], s["workers"].map { |w| w["state"] }, "in worker order"
    busy = s["workers"].first
    assert_equal [0, 100, 1, 52_428_800], busy.values_at("nr", "pid", "busy_threads", "rss_bytes")
    assert_equal ["POST"], [busy["request"]["method"]]
    assert_operator busy["request"]["seconds"], :>=, 0
    refute busy["request"].key?("path"), "paths may carry secrets: shown only when asked"
    assert_nil s["workers"][1]["request"]
    assert_nil s["workers"][1]["rss_bytes"]
    assert_equal Narwhal::Scoreboard::COUNTERS.map(&:to_s), busy["counters"].keys
    assert_equal %w[request_duration queue_time_header queue_time_kernel], busy["histograms"].keys
    assert_equal 1, s["events"]["respawns"]
    assert_equal Narwhal::Scoreboard::HISTOGRAM_BOUNDS, s["histogram_bounds"]
    assert_operator s["uptime_seconds"], :>=, 0
  end

  def test_the_path_of_a_request_is_shown_when_asked
    serve
    assert_equal "/password/reset/s3cret", status(paths: true)["workers"].first["request"]["path"]
  end

  # A slot still holding its last worker's pid is not the new worker's:
  # booting until the new one claims it.
  def test_a_slot_that_names_another_pid_is_booting
    serve
    @workers[1].pid = 999
    assert_equal "booting", status["workers"][1]["state"]
  end

  def test_ready_needs_a_serving_worker_and_no_drain
    s = status
    refute s["ready"]
    assert_equal "no worker serving", Status.not_ready_reason(s)
    serve
    assert_nil Status.not_ready_reason(status)
    @master.draining = true
    s = status
    assert_equal [false, true], s.values_at("ready", "draining")
    assert_equal "draining", Status.not_ready_reason(s)
  end

  # After USR2 both masters answer on one control socket: an old master
  # whose workers are gone is ready while its successor serves (its
  # workers hand over one by one, or TTOU took them), not while it drains.
  def test_ready_while_the_usr2_successor_serves_with_no_worker_of_its_own
    @master.successor_serving = true
    s = status
    assert_equal [true, true], s.values_at("ready", "successor_serving")
    assert_nil Status.not_ready_reason(s)
    @master.draining = true
    assert_equal "draining", Status.not_ready_reason(status)
  end

  # Connections nobody accepted yet, as the kernel counts them.
  def test_each_listener_with_its_listen_queue
    port = @listener.io.local_address.ip_port
    2.times { @clients << TCPSocket.new("127.0.0.1", port) }
    listeners = wait_until(message: "two connections queued") do
      found = status["listeners"]
      found if found.first["queue"] == 2
    end
    assert_equal [{ "address" => @listener.address, "queue" => 2, "queue_max" => 16 }], listeners
  end

  # What tells a master handing over, and how its workers boot.
  def test_the_hand_over_and_how_boots_go
    assert_equal [false, true, 0], status.values_at("handing_over", "ever_ready", "boot_failures")
    @master.handing_over = true
    table = Workers.new([], false, 2)
    s = Status.new(@master, @board, table).to_h
    assert_equal [true, false, 2], s.values_at("handing_over", "ever_ready", "boot_failures")
  end

  def test_it_serialises_to_json_as_it_is
    serve
    s = status(paths: true)
    assert_equal s, JSON.parse(JSON.generate(s))
  end
end
