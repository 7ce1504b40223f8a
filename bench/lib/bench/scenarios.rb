# frozen_string_literal: true

module Bench
  # A table column: the result key, its header and how to print it.
  Column = Struct.new(:key, :header, :format)

  # One table of a scenario: an app, a shape (processes × threads, see
  # Server#shape) and how to measure. +stops+: the measurement itself ends
  # the server (it is not expected alive after it).
  Variant = Struct.new(:key, :title, :app, :processes, :threads, :preload, :servers, :measure, :stops,
                       keyword_init: true) do
    def app_path
      File.join(APPS, app)
    end

    def serves?(server)
      servers.nil? || servers.call(server, self)
    end

    def preload_for(server)
      preload.respond_to?(:call) ? preload.call(server) : preload
    end
  end

  # A scenario: its variants, its columns and the metric its chart shows.
  # +ratios+: further column keys each server is compared with narwhal on,
  # beside the primary one. +comparisons+: each server in one variant
  # against itself in another (Comparison).
  Scenario = Struct.new(:name, :title, :about, :variants, :columns, :primary, :lower_is_better, :ratios,
                        :comparisons, keyword_init: true)

  # Each server in variant +variant+ as a multiple of itself in variant
  # +base+ (e.g. threads 5 over threads 1); +labels+ name the two.
  Comparison = Struct.new(:title, :variant, :base, :labels, keyword_init: true)

  # Durations and sizes, shortened as a whole by --quick.
  Timing = Struct.new(:duration, :warmup, :long, :event_load, :burst, keyword_init: true)
  FULL = Timing.new(duration: 10, warmup: 2, long: 15, event_load: 20, burst: 10_000)
  QUICK = Timing.new(duration: 2, warmup: 1, long: 3, event_load: 8, burst: 2_000)

  RPS = Column.new("rps", "req/s", :rps)
  P50 = Column.new("p50_ms", "p50", :ms)
  P99 = Column.new("p99_ms", "p99", :ms)
  P999 = Column.new("p999_ms", "p99.9", :ms)
  ERRORS = Column.new("errors", "errors", :errors)
  PEAK_RSS = Column.new("peak_rss_mb", "peak RSS", :mb)
  PEAK_PSS = Column.new("peak_pss_mb", "peak PSS", :mb)
  WRK_COLUMNS = [RPS, P50, P99, P999, ERRORS, PEAK_RSS, PEAK_PSS].freeze
  CPU = Column.new("cpu_us", "CPU per request", :us)

  RUBY_SERVERS = ->(server, _variant) { server.ruby? }
  # Servers that run threads in a process: a threads-N table means the same for each.
  THREADED = ->(server, _variant) { server.model == :threads }
  MULTI_PROCESS = ->(server, variant) { server.ruby? && server.multi_process?(variant.processes) }
  RESTARTABLE = ->(server, _variant) { !server.restart.nil? }

  def self.scenarios(timing)
    main_scenarios(timing) + held_scenarios(timing) + [quit_scenario(timing)]
  end

  # rubocop:disable Metrics/MethodLength -- a table of scenarios reads best in one place
  def self.main_scenarios(timing)
    hello = lambda do |key, title, processes, close, threads: 1, servers: nil|
      Variant.new(key: key, title: title, app: "hello.ru", processes: processes, threads: threads, preload: true,
                  servers: servers,
                  measure: lambda { |s|
                    Measurements.wrk(s, warmup: timing.warmup, threads: 2, connections: 16,
                                        seconds: timing.duration, close: close)
                  })
    end
    [
      Scenario.new(
        name: "hello", title: "hello: the smallest response",
        about: "`[200, {\"content-type\"=>\"text/html\"}, [\"Hello, Rack!\"]]`; wrk -t2 -c16 " \
               "-d#{timing.duration}s, keep-alive and `Connection: close` (a new connection per request, " \
               "as behind nginx). nginx is the machine's ceiling, with as many worker processes as the table has " \
               "processes. Threads 5: the servers that run threads (narwhal, puma, iodine, agoo) in 1 process " \
               "with 5 threads, and each one's threads 5 over its own threads 1. " \
               "CPU per request: user + system time of the server's processes over the measured run.",
        columns: [*WRK_COLUMNS, CPU], primary: "rps",
        comparisons: [Comparison.new(title: "threads 5 vs threads 1, keep-alive, 1 process",
                                     variant: "keepalive-1-t5", base: "keepalive-1",
                                     labels: ["threads 1", "threads 5"])],
        variants: [hello.call("keepalive-1", "keep-alive, 1 process", 1, false),
                   hello.call("keepalive-1-t5", "keep-alive, 1 process, threads 5", 1, false,
                              threads: 5, servers: THREADED),
                   hello.call("close-1", "Connection: close, 1 process", 1, true),
                   hello.call("keepalive-2", "keep-alive, 2 processes", 2, false),
                   hello.call("close-2", "Connection: close, 2 processes", 2, true)]
      ),
      Scenario.new(
        name: "burst", title: "burst: 1,000 clients at once",
        about: "`ab -n #{timing.burst} -c 1000` (a new connection per request) against hello, " \
               "2 processes; every failure counts.",
        columns: [RPS, P50, P99, Column.new("max_ms", "max", :ms), ERRORS, PEAK_RSS, CPU], primary: "rps",
        variants: [Variant.new(key: "ab", title: "ab -c 1000, 2 processes", app: "hello.ru", processes: 2,
                               threads: 1, preload: true, servers: RUBY_SERVERS,
                               measure: lambda { |s|
                                 Measurements.ab(s, warmup: timing.warmup, requests: timing.burst, concurrency: 1000)
                               })]
      ),
      Scenario.new(
        name: "io", title: "io: requests that wait 20 ms",
        about: "Each request sleeps 20 ms; wrk -t2 -c64 -d#{timing.duration}s keep-alive. Threaded servers " \
               "run 2 processes × 5 threads, process-only servers 10 processes, fiber servers 2 processes.",
        columns: [*WRK_COLUMNS, CPU], primary: "rps", ratios: ["p99_ms"],
        variants: [Variant.new(key: "sleep20", title: "20 ms wait, 64 connections, 10 threads or processes",
                               app: "io.ru", processes: 2, threads: 5, preload: true, servers: RUBY_SERVERS,
                               measure: lambda { |s|
                                 Measurements.wrk(s, warmup: timing.warmup, threads: 2, connections: 64,
                                                     seconds: timing.duration)
                               })]
      ),
      Scenario.new(
        name: "cpu", title: "cpu: requests that compute 2 ms",
        about: "Each request burns 2 ms of CPU time; wrk -t2 -c16 -d#{timing.duration}s keep-alive; " \
               "2 processes, 1 thread each (as many processes as cores).",
        columns: WRK_COLUMNS, primary: "rps",
        variants: [Variant.new(key: "burn2ms", title: "2 ms of CPU, 2 processes", app: "cpu.ru", processes: 2,
                               threads: 1, preload: true, servers: RUBY_SERVERS,
                               measure: lambda { |s|
                                 Measurements.wrk(s, warmup: timing.warmup, threads: 2, connections: 16,
                                                     seconds: timing.duration)
                               })]
      ),
      Scenario.new(
        name: "tail", title: "tail: 2% slow requests",
        about: "2% of requests take 1 s (900 ms waiting on a backend, then 100 ms of CPU), the rest answer " \
               "at once. 6 client processes, each " \
               "timing its own requests, a new connection per request (as behind a proxy), " \
               "#{timing.long} s. Latencies are of the fast requests only. Threaded servers 2 × 4, " \
               "process-only servers 8 processes, fiber servers 2 processes.",
        columns: [RPS, P50, P99, P999, Column.new("stdev_ms", "stdev", :ms),
                  Column.new("slow_p50_ms", "slow p50", :ms), ERRORS, PEAK_RSS],
        primary: "p99_ms", lower_is_better: true,
        variants: [Variant.new(key: "slow2pct", title: "fast requests' latency with 2% taking 1 s",
                               app: "tail.ru", processes: 2, threads: 4, preload: true, servers: RUBY_SERVERS,
                               measure: lambda { |s|
                                 Measurements.tail(s, warmup: timing.warmup, clients: 6, seconds: timing.long)
                               })]
      ),
      Scenario.new(
        name: "memory", title: "memory: an app with 100 MB of objects",
        about: "The app builds about 100 MB of Ruby objects when it loads, preloaded where the server can: " \
               "4 processes, and 10 requests at once (threaded servers 2 × 5, process-only servers 10 " \
               "processes, fiber servers 2). After a wrk warm-up, every process's RSS, PSS and USS from " \
               "/proc/PID/smaps_rollup. Total PSS is what the server costs the machine.",
        columns: [Column.new("total_pss_mb", "total PSS", :mb), Column.new("total_rss_mb", "total RSS", :mb),
                  Column.new("processes", "processes", :count), Column.new("main_pss_mb", "main PSS", :mb),
                  Column.new("worker_rss_mb", "worker RSS", :mb), Column.new("worker_pss_mb", "worker PSS", :mb),
                  Column.new("worker_uss_mb", "worker USS", :mb)],
        primary: "total_pss_mb", lower_is_better: true,
        variants: [Variant.new(key: "preload100mb", title: "4 processes, 100 MB preloaded", app: "memory.ru",
                               processes: 4, threads: 1, preload: true, servers: RUBY_SERVERS,
                               measure: ->(s) { Measurements.memory(s, warmup: timing.warmup * 2) }),
                   Variant.new(key: "preload100mb-2x5", title: "10 requests at once (2 × 5 or 10 processes), " \
                                                               "100 MB preloaded",
                               app: "memory.ru", processes: 2, threads: 5, preload: true, servers: RUBY_SERVERS,
                               measure: ->(s) { Measurements.memory(s, warmup: timing.warmup * 2) })]
      ),
      Scenario.new(
        name: "restart", title: "restart: deploys and crashes under load",
        about: "wrk -t2 -c16 `Connection: close` for #{timing.event_load} s; #{Measurements::EVENT_AT} s in, " \
               "the server's own zero-downtime restart (narwhal, unicorn: USR2, then QUIT to the old master " \
               "once the new one's workers are up; puma: phased restart, USR1; falcon: HUP; iodine: USR1), " \
               "or SIGKILL to the worker holding the most connections. 2 processes. Every failed request " \
               "counts; the app sends Content-Length so that every failure is one (see hello_framed.ru).",
        columns: [ERRORS, Column.new("in_flight", "in flight at kill", :count), RPS, P99,
                  Column.new("max_ms", "max", :ms), Column.new("event_s", "event took", :s)],
        primary: "errors", lower_is_better: true,
        variants: [
          # Puma's phased restart does not work with preload_app! (its docs say so).
          Variant.new(key: "zero-downtime", title: "zero-downtime restart under load", app: "hello_framed.ru",
                      processes: 2, threads: 1, preload: ->(server) { server.name != "puma" },
                      servers: RESTARTABLE,
                      measure: ->(s) { Measurements.restart(s, warmup: timing.warmup, seconds: timing.event_load) }),
          Variant.new(key: "kill-9", title: "kill -9 of a worker under load", app: "hello_framed.ru",
                      processes: 2, threads: 1, preload: true, servers: MULTI_PROCESS,
                      measure: ->(s) { Measurements.kill(s, warmup: timing.warmup, seconds: timing.event_load) })
        ]
      ),
      Scenario.new(
        name: "slow", title: "slow clients",
        about: "500 connections send their headers one byte per second and 200 more their bodies, while one " \
               "fast client (wrk -t1 -c4, 5 s timeout) measures for #{timing.long} s. 2 processes. A server " \
               "that gives a process to each connection stalls here: that is what this row shows.",
        columns: [P99, P50, RPS, ERRORS, Column.new("closed_by_server", "slow ones closed", :count), PEAK_RSS],
        primary: "p99_ms", lower_is_better: true,
        variants: [Variant.new(key: "trickle", title: "fast client among 700 slow ones", app: "hello.ru",
                               processes: 2, threads: 1, preload: true, servers: RUBY_SERVERS,
                               measure: lambda { |s|
                                 Measurements.slow(s, warmup: timing.warmup, headers: 500, bodies: 200,
                                                      seconds: timing.long)
                               })]
      )
    ]
  end
  # rubocop:enable Metrics/MethodLength
end
