# frozen_string_literal: true

require "test_helper"

# A Status hash as Prometheus text: families, labels, cumulative buckets.
class MetricsTest < Minitest::Test
  def worker(nr, state, busy, durations, threads: 4)
    { "nr" => nr, "pid" => 100 + nr, "state" => state, "requests" => 7, "threads" => threads, "busy_threads" => busy,
      "rss_bytes" => nr.zero? ? 52_428_800 : nil, "request" => nil,
      "counters" => Narwhal::Scoreboard::COUNTERS.to_h { |c| [c.to_s, 1] },
      "histograms" => { "request_duration" => { "counts" => durations, "sum" => 1.25 },
                        "queue_time_header" => { "counts" => [0] * 12, "sum" => 0.0 },
                        "queue_time_kernel" => { "counts" => [1] + ([0] * 11), "sum" => 0.001 } } }
  end

  def render
    status = { "pid" => 1, "ready" => true, "draining" => false, "worker_processes" => 3, "threads" => 4,
               "workers" => [worker(0, "busy", 3, [2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4]), worker(1, "booting", 0, [0] * 12)],
               "listeners" => [{ "address" => %(/tmp/a"b.sock), "queue" => 5, "queue_max" => 1024 },
                               { "address" => "127.0.0.1:8080", "queue" => nil, "queue_max" => nil }],
               "events" => { "respawns" => 2, "timeout_kills" => 1 },
               "histogram_bounds" => Narwhal::Scoreboard::HISTOGRAM_BOUNDS }
    Narwhal::Master::Control::Metrics.render(status)
  end

  def test_gauges_counters_and_labels
    text = render
    assert_includes text, %(narwhal_workers{state="idle"} 0\nnarwhal_workers{state="busy"} 1\n)
    assert_includes text, %(narwhal_workers{state="booting"} 1\n)
    assert_includes text, %(narwhal_threads{state="busy"} 3\nnarwhal_threads{state="idle"} 1\n), "of serving workers"
    assert_includes text, "# TYPE narwhal_respawns_total counter\nnarwhal_respawns_total 2\n"
    assert_includes text, "narwhal_timeout_kills_total 1\n"
    assert_includes text, "narwhal_memory_recycles_total 0\n", "an event not counted yet reads 0"
    assert_includes text, %(narwhal_worker_rss_bytes{worker="0"} 52428800\n)
    refute_includes text, %(narwhal_worker_rss_bytes{worker="1"}), "unknown RSS is left out"
    assert_includes text, %(narwhal_listen_queue{listener="/tmp/a\\"b.sock"} 5\n), "label values escaped"
    refute_includes text, "127.0.0.1:8080", "a queue the kernel did not report is left out"
    assert_includes text, "# TYPE narwhal_worker_requests_total counter\n"
  end

  # After a HUP to fewer threads, old and new workers serve side by side
  # for a moment: each counts its own threads.
  def test_idle_threads_are_each_serving_workers_own
    workers = [worker(0, "idle", 0, [0] * 12, threads: 16), worker(1, "busy", 1, [0] * 12, threads: 4),
               worker(2, "quitting", 0, [0] * 12, threads: 16)]
    status = { "worker_processes" => 2, "threads" => 4, "workers" => workers, "listeners" => [], "events" => {},
               "histogram_bounds" => Narwhal::Scoreboard::HISTOGRAM_BOUNDS }
    text = Narwhal::Master::Control::Metrics.render(status)
    assert_includes text, %(narwhal_threads{state="busy"} 1\nnarwhal_threads{state="idle"} 19\n)
  end

  def test_histograms_are_cumulative_per_worker
    text = render
    assert_includes text, "# TYPE narwhal_request_duration_seconds histogram\n"
    assert_includes text, %(narwhal_request_duration_seconds_bucket{worker="0",le="0.005"} 2\n) +
                          %(narwhal_request_duration_seconds_bucket{worker="0",le="0.01"} 3\n)
    assert_includes text, %(narwhal_request_duration_seconds_bucket{worker="0",le="10"} 3\n) +
                          %(narwhal_request_duration_seconds_bucket{worker="0",le="+Inf"} 7\n) +
                          %(narwhal_request_duration_seconds_sum{worker="0"} 1.25\n) +
                          %(narwhal_request_duration_seconds_count{worker="0"} 7\n)
    assert_includes text, %(narwhal_queue_time_seconds_count{worker="1",source="header"} 0\n)
  end

  def test_requests_shed_are_one_counter_labelled_by_worker_and_reason
    text = render
    assert_includes text, "# TYPE narwhal_requests_shed_total counter\n" +
                          %(narwhal_requests_shed_total{worker="0",reason="queue_deadline"} 1\n) +
                          %(narwhal_requests_shed_total{worker="1",reason="queue_deadline"} 1\n)
    refute_includes text, "narwhal_worker_requests_shed_queue_total"
  end

  def test_queue_time_is_one_histogram_labelled_by_its_source
    text = render
    assert_equal 1, text.scan("# TYPE narwhal_queue_time_seconds histogram\n").size
    assert_includes text, %(narwhal_queue_time_seconds_bucket{worker="0",source="kernel",le="+Inf"} 1\n) +
                          %(narwhal_queue_time_seconds_sum{worker="0",source="kernel"} 0.001\n) +
                          %(narwhal_queue_time_seconds_count{worker="0",source="kernel"} 1\n)
    assert_includes text, %(narwhal_queue_time_seconds_count{worker="0",source="header"} 0\n)
  end
end
