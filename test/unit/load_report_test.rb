# frozen_string_literal: true

require "test_helper"
require "socket"

# Narwhal::LoadReport (load_report.c): the endpoint-load-metrics value in
# ORCA's text form as Envoy parses it, and what it reads of the scoreboard:
# the busy share of every up worker's threads over time, the requests
# finished per second, the connections waiting.
class LoadReportTest < Minitest::Test
  REPORT = Narwhal::LoadReport
  # The fields Envoy's ORCA text parser takes (any other name fails the
  # whole report), "named_metrics." ones with a name of their own.
  ORCA_FIELDS = %w[cpu_utilization mem_utilization application_utilization rps_fractional eps].freeze

  # As Envoy reads the header: "TEXT ", then comma-separated name=value
  # pairs (whitespace around each ignored), every value a finite number,
  # no name twice.
  def parse(value)
    assert value.start_with?("TEXT "), value
    pairs = value.delete_prefix("TEXT ").split(",").map { |pair| pair.strip.split("=", 2) }
    names = pairs.map(&:first)
    assert_equal names.uniq, names, "a name twice: #{value}"
    pairs.to_h do |name, number|
      assert(ORCA_FIELDS.include?(name) || name.match?(/\Anamed_metrics\.\w+\z/), "not an ORCA field: #{name}")
      assert_match(/\A\d+(\.\d+)?\z/, number, "#{name}: not a plain number")
      [name, Float(number)]
    end
  end

  def now_us
    Process.clock_gettime(Process::CLOCK_MONOTONIC, :microsecond)
  end

  def board(workers: 2, threads: 4)
    @board = Narwhal::Scoreboard.new(workers, threads: threads)
    @board.span = workers
    workers.times do |nr|
      @board.reset(nr, 1000 + nr)
      @board.worker_slot(nr).serving = true
    end
    @board
  end

  def test_the_value_is_orca_text_envoy_parses
    value = REPORT.format(0.4213372, 118.5254, 3)
    assert_equal "TEXT application_utilization=0.421337, rps_fractional=118.525, named_metrics.queue=3", value
    assert_equal({ "application_utilization" => 0.421337, "rps_fractional" => 118.525, "named_metrics.queue" => 3.0 },
                 parse(value))
  end

  def test_numbers_are_written_whole_and_in_range
    assert_equal "TEXT application_utilization=0.000000, rps_fractional=0.000, named_metrics.queue=0",
                 REPORT.format(-0.5, Float::NAN, -2)
    assert_equal "TEXT application_utilization=1.000000, rps_fractional=0.000, named_metrics.queue=0",
                 REPORT.format(7, -1, 0)
    big = parse(REPORT.format(Float::INFINITY, Float::INFINITY, 2**62))
    assert_equal [1.0, 1e12, 2.0**62], big.values
    # utilization is what a balancer divides by: a light load keeps its digits
    assert_equal 0.000042, parse(REPORT.format(0.0000421, 1, 0))["application_utilization"]
  end

  def test_the_first_sample_counts_the_threads_busy_now
    board
    @board.thread_slot(0, 0).request_started
    @board.thread_slot(1, 2).request_started
    report = REPORT.new(@board, 0, 4)
    assert_equal({ "application_utilization" => 0.25, "rps_fractional" => 0.0, "named_metrics.queue" => 0.0 },
                 parse(report.refresh(now_us)))
  end

  # Three of eight threads held for a second: the average moves 1 - 1/e of
  # the way towards 3/8 in one time constant (SMOOTHING).
  def test_utilization_is_the_busy_share_of_the_threads_over_time
    board
    report = REPORT.new(@board, 0, 4)
    start = now_us
    report.refresh(start)
    [[0, 0], [0, 1], [1, 3]].each { |nr, i| @board.thread_slot(nr, i).request_started }
    held = parse(report.refresh(now_us + 1_000_000))["application_utilization"]
    assert_in_delta 3.0 / 8 * (1 - Math.exp(-1)), held, 0.01
    much_later = parse(report.refresh(now_us + 20_000_000))["application_utilization"]
    assert_in_delta 3.0 / 8, much_later, 0.01
    assert_equal 0.0, parse(report.refresh(now_us + 20_000_000))["rps_fractional"]
  end

  # Requests finished since the last sample, per second; a finished
  # request's time counts once (its age while in flight, then its duration).
  def test_rps_counts_finished_requests_per_second
    board
    report = REPORT.new(@board, 1, 4)
    start = now_us
    report.refresh(start)
    slot = @board.thread_slot(1, 0)
    50.times do
      slot.request_started
      slot.request_finished
    end
    value = parse(report.refresh(start + 5_000_000))
    assert_in_delta 50.0 / 5 * (1 - Math.exp(-5)), value["rps_fractional"], 0.1
    assert_operator value["application_utilization"], :<, 0.01, "50 empty requests are hardly any time"
  end

  # A worker replaced between two samples: its slot's counts start again
  # from 0, which is new work, never a negative one.
  def test_a_respawned_worker_counts_from_its_reset
    board
    slot = @board.thread_slot(1, 0)
    20.times do
      slot.request_started
      slot.request_finished
    end
    report = REPORT.new(@board, 0, 4)
    start = now_us
    report.refresh(start)
    @board.reset(1, 2000)
    @board.worker_slot(1).serving = true
    5.times do
      slot.request_started
      slot.request_finished
    end
    assert_in_delta 5.0 * (1 - Math.exp(-1)), parse(report.refresh(start + 1_000_000))["rps_fractional"], 0.05
  end

  # Only workers that are up count as capacity: one booting (forked, not
  # serving yet) or gone adds no threads; the reporting worker counts even
  # when its slot says nothing (a server without a master).
  def test_capacity_is_the_threads_of_the_workers_that_are_up
    board(workers: 3)
    @board.reset(2) # gone
    @board.reset(1, 1001) # booting
    @board.thread_slot(0, 0).request_started
    report = REPORT.new(@board, 0, 4)
    assert_equal 0.25, parse(report.refresh(now_us))["application_utilization"]

    alone = Narwhal::Scoreboard.new(1, threads: 2)
    alone.thread_slot(0, 1).request_started
    assert_equal 0.5, parse(REPORT.new(alone, 0, 2).refresh(now_us))["application_utilization"]
  end

  # The queue: connections in the TCP listeners' accept queues and those
  # the workers took that wait for a thread.
  def test_the_queue_counts_listen_queues_and_connections_waiting_for_a_thread
    board
    listener = TCPServer.new("127.0.0.1", 0)
    unix_dir = Dir.mktmpdir
    unix = UNIXServer.new(File.join(unix_dir, "s"))
    report = REPORT.new(@board, 0, 4)
    report.listeners = [listener.fileno, unix.fileno, $stdout.fileno]
    assert_equal 1, report.listener_count, "only a listening TCP socket has a queue to read"
    @clients = Array.new(3) { TCPSocket.new("127.0.0.1", listener.local_address.ip_port) }
    @board.worker_slot(1).queued = 2
    assert_equal 5.0, parse(report.refresh(now_us))["named_metrics.queue"]
  ensure
    @clients&.each(&:close)
    listener&.close
    unix&.close
    FileUtils.rm_rf(unix_dir) if unix_dir
  end

  # #value is what the next response carries: sampled again only once
  # REFRESH has passed since the last sample.
  def test_the_value_is_sampled_at_most_every_refresh
    board
    report = REPORT.new(@board, 0, 4)
    first = report.value
    @board.worker_slot(1).queued = 4
    assert_equal first, report.value, "within REFRESH: the same line"
    report.refresh(now_us - (REPORT::REFRESH * 1e6).to_i - 1) # as if the last sample were that old
    assert_equal 4.0, parse(report.value)["named_metrics.queue"]
    assert_equal 0.1, REPORT::REFRESH
    assert_equal "endpoint-load-metrics", REPORT::HEADER
  end

  def test_refuses_what_it_cannot_read
    b = Narwhal::Scoreboard.new(2, threads: 1)
    assert_raises(IndexError) { REPORT.new(b, 2, 1) }
    assert_raises(ArgumentError) { REPORT.new(b, 0, 0) }
    assert_raises(TypeError) { REPORT.new(Object.new, 0, 1) }
  end
end
