# frozen_string_literal: true

require "test_helper"

# What `narwhal status` prints from a master's GET /status.
class StatusCommandTest < Minitest::Test
  def worker(nr, state, busy, requests)
    { "nr" => nr, "pid" => 100 + nr, "state" => state, "requests" => requests, "busy_threads" => busy,
      "rss_bytes" => 52_428_800, "request" => nil }
  end

  def status(uptime: 7_500.4)
    { "pid" => 99, "ready" => true, "draining" => false, "worker_processes" => 3, "threads" => 4,
      "uptime_seconds" => uptime,
      "workers" => [worker(0, "busy", 2, 10), worker(1, "idle", 0, 7), worker(2, "busy", 1, 3)],
      "listeners" => [{ "address" => "127.0.0.1:8080", "queue" => 0, "queue_max" => 1024 }],
      "events" => { "respawns" => 1, "timeout_kills" => 2, "memory_recycles" => 3, "request_recycles" => 4 } }
  end

  def table(hash)
    Narwhal::CLI::StatusCommand.new([], out: nil, err: nil).table(hash)
  end

  def test_the_summary_says_capacity_uptime_and_what_happened_to_workers
    lines = table(status).lines.map(&:rstrip)
    assert_equal "master pid=99 ready, up 2h 5m; workers: 2 busy, 1 idle; threads: 3 of 12 busy " \
                 "(3 x 4); listen queue: 127.0.0.1:8080 0/1024", lines[0]
    assert_equal "since start: 1 respawned, 2 killed for timeout, 7 recycled (3 for memory, 4 for requests)",
                 lines[1]
    assert_match(/^worker\s+pid\s+state\s+requests\s+busy\s+age\s+request\s+rss$/, lines[3])
    assert_match(%r{^\s+0\s+100\s+busy\s+10\s+2/4\s+-\s+-\s+50\.0 MiB$}, lines[4])
    assert_match(%r{^\s+1\s+101\s+idle\s+7\s+0/4\s}, lines[5])
  end

  # Right after a HUP to fewer threads, old and new workers serve together.
  def test_each_worker_counts_its_own_threads
    hash = status.merge("workers" => [worker(0, "busy", 2, 10).merge("threads" => 16),
                                      worker(1, "idle", 0, 7).merge("threads" => 4)])
    lines = table(hash).lines.map(&:rstrip)
    assert_includes lines[0], "threads: 2 of 20 busy (16 + 4); "
    assert_match(%r{^\s+0\s+100\s+busy\s+10\s+2/16\s}, lines[4])
    assert_match(%r{^\s+1\s+101\s+idle\s+7\s+0/4\s}, lines[5])
  end

  def test_uptime_reads_in_the_two_largest_units
    { 0.4 => "up 0s", 59.9 => "up 59s", 61 => "up 1m 1s", 3_600 => "up 1h 0m", 90_061 => "up 1d 1h" }
      .each do |seconds, text|
      assert_includes table(status(uptime: seconds)).lines.first, ", #{text};", seconds
    end
    refute_match(/ up /, table(status.tap { |s| s.delete("uptime_seconds") }).lines.first,
                 "an older master without the field")
  end
end
