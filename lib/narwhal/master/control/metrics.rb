# frozen_string_literal: true

module Narwhal
  class Master
    class Control
      # A Status hash in Prometheus's text exposition format (version 0.0.4),
      # what GET /metrics answers. Per-worker series carry a `worker` label
      # (the worker number, which survives respawns; the pid is a gauge):
      # a respawned worker's counters and histograms start again from zero,
      # which Prometheus's rate() reads as a counter reset.
      class Metrics
        CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
        EVENTS = { "respawns" => "Workers forked to replace one that exited",
                   "timeout_kills" => "Workers killed for timeout",
                   "memory_recycles" => "Workers retired for worker_memory_limit",
                   "request_recycles" => "Workers retired for worker_max_requests" }.freeze
        COUNTERS = { "connections_accepted" => "Connections the worker accepted",
                     "requests_rejected" => "Requests the server answered itself (4xx, 408, 413), not the app",
                     "app_errors" => "Requests answered 500 after the app raised",
                     "request_timeouts" => "Requests soft_timeout interrupted",
                     "connections_handed_off" => "Idle kept-alive connections given to a sibling worker " \
                                                 "(keepalive_release)" }.freeze
        # reason label => the worker counter that counts requests shed for it
        SHED = { "queue_deadline" => "requests_shed_queue" }.freeze
        # name => [help, { source label (nil: none) => Status histogram key }]
        HISTOGRAMS = {
          "request_duration" => ["Time from the app's call to the response written",
                                 { nil => "request_duration" }],
          "queue_time" => ["Time a request waited before the app started, since the proxy's X-Request-Start " \
                           "(source=header) or its bytes' arrival (source=kernel)",
                           { "kernel" => "queue_time_kernel", "header" => "queue_time_header" }]
        }.freeze

        def self.render(status)
          new(status).render
        end

        def initialize(status)
          @status = status
          @out = +""
        end

        def render
          workers = @status["workers"]
          family("narwhal_workers", "gauge", "Workers by state") do
            Status::STATES.each { |s| sample("narwhal_workers", { "state" => s }, workers.count { |w| w["state"] == s }) }
          end
          gauge("narwhal_worker_processes", "Workers the master keeps (worker_processes)", @status["worker_processes"])
          threads(workers)
          per_worker(workers)
          EVENTS.each do |event, help|
            gauge("narwhal_#{event}_total", help, @status["events"].fetch(event, 0), type: "counter")
          end
          listen_queues
          HISTOGRAMS.each { |name, (help, sources)| histogram(name, help, sources, workers) }
          @out
        end

        private

        def threads(workers)
          busy = workers.sum { |w| w["busy_threads"] }
          serving = workers.select { |w| Status.serving?(w) }.sum { |w| w["threads"] }
          family("narwhal_threads", "gauge", "Request threads of serving workers by state") do
            sample("narwhal_threads", { "state" => "busy" }, busy)
            sample("narwhal_threads", { "state" => "idle" }, [serving - busy, 0].max)
          end
        end

        def per_worker(workers)
          per_worker_family(workers, "narwhal_worker_pid", "gauge", "Process id of each worker") { |w| w["pid"] }
          per_worker_family(workers, "narwhal_worker_requests_total", "counter",
                            "Requests the worker finished") { |w| w["requests"] }
          per_worker_family(workers, "narwhal_worker_busy_threads", "gauge",
                            "Requests the worker is running now") { |w| w["busy_threads"] }
          per_worker_family(workers, "narwhal_worker_rss_bytes", "gauge", "Resident set size of each worker") do |w|
            w["rss_bytes"]
          end
          COUNTERS.each do |name, help|
            per_worker_family(workers, "narwhal_worker_#{name}_total", "counter", help) { |w| w["counters"][name] }
          end
          shed(workers)
        end

        def shed(workers)
          family("narwhal_requests_shed_total", "counter",
                 "Requests answered 503 without the app, by reason (queue_deadline: they waited past it)") do
            workers.each do |w|
              SHED.each do |reason, counter|
                sample("narwhal_requests_shed_total", { "worker" => w["nr"].to_s, "reason" => reason },
                       w["counters"][counter])
              end
            end
          end
        end

        def per_worker_family(workers, name, type, help)
          family(name, type, help) do
            workers.each do |w|
              value = yield(w)
              sample(name, { "worker" => w["nr"].to_s }, value) unless value.nil?
            end
          end
        end

        def listen_queues
          listeners = @status["listeners"].reject { |l| l["queue"].nil? }
          family("narwhal_listen_queue", "gauge", "Connections waiting in the listen socket to be accepted") do
            listeners.each { |l| sample("narwhal_listen_queue", { "listener" => l["address"] }, l["queue"]) }
          end
          family("narwhal_listen_queue_max", "gauge", "Most connections the listen socket queues (backlog)") do
            listeners.each { |l| sample("narwhal_listen_queue_max", { "listener" => l["address"] }, l["queue_max"]) }
          end
        end

        # Cumulative buckets per worker (and source), as Prometheus's
        # histograms are.
        def histogram(key, help, sources, workers)
          name = "narwhal_#{key}_seconds"
          family(name, "histogram", help) do
            workers.each do |w|
              sources.each do |source, status_key|
                labels = { "worker" => w["nr"].to_s }
                labels["source"] = source if source
                buckets(name, labels, w["histograms"][status_key])
              end
            end
          end
        end

        def buckets(name, labels, histogram)
          bounds = @status["histogram_bounds"].map { |b| format("%g", b) } << "+Inf"
          total = 0
          bounds.zip(histogram["counts"]).each do |le, count|
            sample("#{name}_bucket", labels.merge("le" => le), total += count)
          end
          sample("#{name}_sum", labels, histogram["sum"])
          sample("#{name}_count", labels, total)
        end

        def gauge(name, help, value, type: "gauge")
          family(name, type, help) { sample(name, {}, value) }
        end

        def family(name, type, help)
          @out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n"
          yield
        end

        def sample(name, labels, value)
          @out << name
          unless labels.empty?
            @out << "{" << labels.map { |k, v| "#{k}=\"#{escape(v)}\"" }.join(",") << "}"
          end
          @out << " " << number(value) << "\n"
        end

        def number(value)
          value.is_a?(Float) ? format("%.9g", value) : value.to_s
        end

        def escape(value)
          value.to_s.gsub(/[\\"\n]/, "\\" => "\\\\", "\"" => "\\\"", "\n" => "\\n")
        end
      end
    end
  end
end
