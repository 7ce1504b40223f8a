# frozen_string_literal: true

module Bench
  # How one scenario measures a running server. Each returns a Hash of
  # numbers for one run; the runner takes medians over runs.
  module Measurements
    # Event scenarios (restart, kill) start the event this far into the load.
    EVENT_AT = 3
    EVENT_TIMEOUT = 60

    module_function

    def with_memory(server)
      sampler = MemorySampler.new(server.pid)
      result = yield
      result.merge(sampler.stop)
    end

    def warm_up(server, seconds, close: false)
      Wrk.run(server.launch.port, threads: 2, connections: 16, seconds: seconds, close: close)
    end

    # CPU time (user + system) of the server's processes per request, in
    # µs: on a busy machine the rates swing with the neighbours' load, the
    # work a request costs holds.
    def with_cpu(server)
      before = ProcessTree.cpu_seconds(server.pid)
      result = yield
      requests = result["requests"]
      return result unless requests&.positive?

      result.merge("cpu_us" => ((ProcessTree.cpu_seconds(server.pid) - before) * 1e6 / requests).round(2))
    end

    # wrk load; +warmup+ seconds first, then +seconds+ measured.
    def wrk(server, warmup:, **opts)
      warm_up(server, warmup, close: opts[:close]) if warmup.positive?
      with_memory(server) { with_cpu(server) { Wrk.run(server.launch.port, **opts) } }
    end

    def ab(server, warmup:, requests:, concurrency:)
      warm_up(server, warmup) if warmup.positive?
      with_memory(server) do
        with_cpu(server) { Ab.run(server.launch.port, requests: requests, concurrency: concurrency) }
      end
    end

    def tail(server, warmup:, clients:, seconds:)
      warm_up(server, warmup, close: true) if warmup.positive?
      with_memory(server) { LatencyClient.new(server.launch.port, clients: clients, seconds: seconds).run }
    end

    # Per-process memory after the warm-up, master (or only process) apart.
    def memory(server, warmup:)
      warm_up(server, warmup)
      server.settle
      per_process = server.pids.to_h { |p| [p, ProcessTree.memory(p)] }.compact
      workers = server.workers - [server.pid]
      mb = ->(kb) { (kb / 1024.0).round(1) }
      median = ->(key) { mb.call(Bench.median(workers.map { |p| per_process.dig(p, key) }) || 0) }
      total = ->(key) { mb.call(per_process.values.sum { |m| m[key] }) }
      main = per_process[server.pid]
      {
        "total_pss_mb" => total.call("pss_kb"), "total_rss_mb" => total.call("rss_kb"),
        "total_uss_mb" => total.call("uss_kb"), "processes" => per_process.size,
        "main_rss_mb" => mb.call(main["rss_kb"]), "main_pss_mb" => mb.call(main["pss_kb"]),
        "main_uss_mb" => mb.call(main["uss_kb"]),
        "worker_rss_mb" => median.call("rss_kb"), "worker_pss_mb" => median.call("pss_kb"),
        "worker_uss_mb" => median.call("uss_kb")
      }
    end

    # Load through the server's own zero-downtime restart.
    def restart(server, warmup:, seconds:)
      during(server, warmup: warmup, seconds: seconds) { Restart.new(server).run }
    end

    # Load while one worker is killed with SIGKILL: the one holding the most
    # client connections (a busy worker, never a server's idle template
    # process). Those connections are its requests in flight.
    def kill(server, warmup:, seconds:)
      during(server, warmup: warmup, seconds: seconds) do
        port = server.launch.port
        held = (server.workers - [server.pid]).to_h { |p| [p, ProcessTree.client_connections(p, port)] }
        victim, in_flight = held.max_by { |p, n| [n, p] }
        raise "#{server.server.name}: no worker process to kill" unless victim

        started = Bench.now
        Process.kill("KILL", victim)
        server.settle
        { "in_flight" => in_flight, "event_s" => (Bench.now - started).round(3) }
      end
    end

    # Runs a Connection: close wrk load (a proxy's traffic) and, EVENT_AT
    # seconds in, the block; the load's errors are the cost of the event.
    def during(server, warmup:, seconds:)
      warm_up(server, warmup, close: true) if warmup.positive?
      load = Thread.new { Wrk.run(server.launch.port, threads: 2, connections: 16, seconds: seconds, close: true) }
      sleep EVENT_AT # the load's own clock: the event happens mid-run
      event = yield
      result = load.value
      result.merge(event)
    end

    # Slow clients hold connections while a fast client measures. A fast
    # client that got no response at all has wrk report zero requests and
    # no latency: every one of its connections counts as an error then.
    FAST_CONNECTIONS = 4

    def slow(server, warmup:, headers:, bodies:, seconds:)
      warm_up(server, warmup) if warmup.positive?
      trickle = SlowClients.new(server.launch.port, headers: headers, bodies: bodies)
      opened = trickle.start
      fast = with_memory(server) do
        Wrk.run(server.launch.port, threads: 1, connections: FAST_CONNECTIONS, seconds: seconds, timeout: 5)
      end
      fast = fast.merge("p50_ms" => nil, "p99_ms" => nil, "p999_ms" => nil, "max_ms" => nil,
                        "errors" => [fast["errors"], FAST_CONNECTIONS].max) if fast["requests"].zero?
      fast.merge(trickle.stop).merge("slow_connections" => opened)
    end
  end

  # A server's own zero-downtime restart, driven as an operator would.
  class Restart
    def initialize(server)
      @server = server
      @kind = server.server.restart
    end

    def run
      started = Bench.now
      @kind == :reexec ? reexec : replace_workers(@kind)
      { "event_s" => (Bench.now - started).round(3) }
    end

    private

    # Unicorn's deploy: USR2 starts a new master from the new code; once its
    # workers are up, QUIT the old master.
    def reexec
      old = @server.pid
      pid_file = @server.launch.pid_file
      @server.signal("USR2")
      new_pid = Bench.wait_until(Measurements::EVENT_TIMEOUT, "a new master") do
        pid = File.read(pid_file).to_i if File.exist?(pid_file)
        pid if pid && pid != old && ProcessTree.alive?(pid)
      end
      Bench.wait_until(Measurements::EVENT_TIMEOUT, "the new master's workers") do
        ProcessTree.children(new_pid).size >= @server.launch.processes
      end
      @server.signal("QUIT", old)
      Bench.wait_until(Measurements::EVENT_TIMEOUT, "the old master to exit") do
        Process.waitpid(old, Process::WNOHANG) rescue nil # rubocop:disable Style/RescueModifier
        !ProcessTree.alive?(old)
      end
      @server.adopt(new_pid)
    end

    # Puma's phased restart, falcon's and iodine's worker restart: done when
    # every worker is a new process.
    def replace_workers(signal)
      before = ProcessTree.children(@server.pid)
      @server.signal(signal)
      Bench.wait_until(Measurements::EVENT_TIMEOUT, "all workers replaced") do
        now = ProcessTree.children(@server.pid)
        now.size >= before.size && (now & before).empty?
      end
      @server.settle
    end
  end
end
