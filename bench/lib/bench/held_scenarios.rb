# frozen_string_literal: true

module Bench
  FAST_P99 = Column.new("p99_ms", "fast p99", :ms)
  FAST_P50 = Column.new("p50_ms", "fast p50", :ms)
  FAST_ANSWERED = Column.new("answered", "fast answered", :count)
  PROBE_REQUESTS = 200

  # Clients that hold the server while a fast one measures: slow readers and
  # idle connections. Threaded servers run 2 processes × 5 threads,
  # process-only ones 10 processes, fiber servers 2 processes.
  # rubocop:disable Metrics/MethodLength -- a table of scenarios reads best in one place
  def self.held_scenarios(timing)
    fast = "a fast client sends #{PROBE_REQUESTS} requests spread over #{timing.long} s, one at a time, " \
           "each on a new connection with a #{Measurements::PROBE_TIMEOUT} s timeout (a failed one counts in " \
           "the latencies with the time it took to fail)"
    [
      Scenario.new(
        name: "readers", title: "slow readers: clients that never read a 50 MB response",
        about: "50 clients each ask for a 50 MB body streamed in 64 KiB chunks (no Content-Length) and never " \
               "read it; once they have the start of their responses (or #{Measurements::READERS_START} s), " \
               "#{fast}. RSS growth: the server's peak RSS, summed over its processes, during the fast " \
               "client's run, over the sum before the readers came. 2 × 5 threads, or 10 processes.",
        columns: [FAST_P99, FAST_P50, FAST_ANSWERED, Column.new("rss_growth_mb", "RSS growth", :mb), PEAK_RSS,
                  Column.new("responding", "readers responded to", :count),
                  Column.new("closed_by_server", "readers closed by server", :count)],
        primary: "p99_ms", lower_is_better: true,
        variants: [Variant.new(key: "50x50mb", title: "fast client beside 50 clients not reading 50 MB",
                               app: "stream.ru", processes: 2, threads: 5, preload: true, servers: RUBY_SERVERS,
                               measure: lambda { |s|
                                 Measurements.readers(s, warmup: timing.warmup, readers: 50,
                                                         requests: PROBE_REQUESTS, seconds: timing.long)
                               })]
      ),
      Scenario.new(
        name: "idle", title: "idle connections: 5,000 opened at once",
        about: "5,000 connections are opened at once (every connect issued before any completes) and send " \
               "nothing; then #{fast}. At the end of its run, the connections to the server's port that no " \
               "process has taken, from /proc/net/tcp: half-open (SYN_RECV, the listen queue overflowed) and " \
               "complete but still in the accept queue. 2 × 5 threads, or 10 processes.",
        columns: [FAST_ANSWERED, FAST_P99, FAST_P50, Column.new("syn_recv", "left in SYN", :count),
                  Column.new("unaccepted", "left in accept queue", :count),
                  Column.new("established", "idle open (client side)", :count),
                  Column.new("closed_by_server", "idle closed by server", :count), PEAK_RSS],
        primary: "p99_ms", lower_is_better: true,
        variants: [Variant.new(key: "5000", title: "fast client beside 5,000 idle connections",
                               app: "stream.ru", processes: 2, threads: 5, preload: true, servers: RUBY_SERVERS,
                               measure: lambda { |s|
                                 Measurements.idle(s, warmup: timing.warmup, connections: 5_000,
                                                      requests: PROBE_REQUESTS, seconds: timing.long)
                               })]
      )
    ]
  end
  # rubocop:enable Metrics/MethodLength
end
