# frozen_string_literal: true

module Narwhal
  class Master
    class Control
      # What the master knows about its server at one moment, read from the
      # scoreboard, its own tables and the kernel, never from the workers:
      # the data behind /metrics, /ready and `narwhal status`. One plain Hash
      # (Integers, Floats, Strings, Arrays, Hashes) so that it serialises to
      # JSON as it is.
      #
      # Runs on the control listener's thread: it only reads what the master's
      # loop writes, through calls that are one step under the GVL
      # (WorkerTable#snapshot, Tally#to_h).
      class Status
        # booting: forked, not serving yet; idle, busy: serving, with no or
        # some request in flight; quitting: told to stop (QUIT), finishing
        STATES = %w[booting idle busy quitting].freeze
        SERVING = %w[idle busy].freeze
        HISTOGRAMS = { "request_duration" => Scoreboard::REQUEST_DURATION,
                       "queue_time_header" => Scoreboard::QUEUE_TIME_HEADER,
                       "queue_time_kernel" => Scoreboard::QUEUE_TIME_KERNEL }.freeze

        # "threads" is the running configuration's; each worker's own count
        # (a HUP may have changed it since the worker was forked) is in its
        # entry. "handing_over": this is the old master of a USR2 hand-over
        # (its successor runs); "ever_ready": a worker of this master served;
        # "boot_failures": workers that failed to boot since one was last
        # ready. "ready" holds with no worker of its own while the master
        # USR2 started serves ("successor_serving"): the two answer on one
        # control socket, and the service is ready whichever answers.
        # master: its config, tally, listeners, draining?, handing_over?,
        # successor_serving?, worker_processes. workers: the WorkerTable.
        # rss: pid -> bytes or nil. paths: whether a request in flight shows its path
        # (`control_status_paths`), which may carry a secret (a reset token):
        # only when the operator says so.
        def initialize(master, scoreboard, workers, rss: System::ProcessMemory.method(:rss), queues: System::ListenQueue.new,
                       paths: false)
          @paths = paths
          @master = master
          @scoreboard = scoreboard
          @workers = workers
          @rss = rss
          @queues = queues
          @started = Clock.now # with the master: it is made at start
        end

        def to_h
          workers = @workers.snapshot.sort_by(&:nr).map { |worker| worker_status(worker) }
          draining = @master.draining?
          successor = @master.successor_serving?
          serving = successor || workers.any? { |w| self.class.serving?(w) }
          { "pid" => Process.pid, "ready" => serving && !draining, "draining" => draining,
            "handing_over" => @master.handing_over?, "ever_ready" => @workers.ever_ready?,
            "boot_failures" => @workers.boot_failures, "successor_serving" => successor,
            "worker_processes" => @master.worker_processes, "threads" => @master.config[:threads],
            "uptime_seconds" => (Clock.now - @started).round(3),
            "workers" => workers, "listeners" => listeners, "events" => @master.tally.to_h.transform_keys(&:to_s),
            "histogram_bounds" => Scoreboard::HISTOGRAM_BOUNDS }
        end

        # Whether a worker's entry is one that serves (idle or busy).
        def self.serving?(worker)
          SERVING.include?(worker["state"])
        end

        # /ready's answer: nil when ready, else why not.
        def self.not_ready_reason(status)
          return "draining" if status["draining"]
          return "no worker serving" unless status["ready"]

          nil
        end

        private

        def worker_status(worker)
          nr = worker.nr
          snap = @scoreboard.snapshot(nr)
          oldest = snap.requests_in_flight.first
          { "nr" => nr, "pid" => worker.pid, "state" => state(worker, snap), "requests" => snap.requests,
            "threads" => worker.threads, "busy_threads" => snap.busy_threads, "rss_bytes" => @rss.call(worker.pid),
            "request" => oldest && request_status(oldest),
            "counters" => snap.counters.transform_keys(&:to_s),
            "histograms" => HISTOGRAMS.transform_values { |kind| histogram(nr, kind) } }
        end

        def request_status(request)
          status = { "method" => request.request_method, "seconds" => request.seconds.round(6) }
          status["path"] = request.path if @paths
          status
        end

        def state(worker, snap)
          return "quitting" if worker.quitting
          # the slot names the worker's pid once the worker claimed it
          return "booting" unless snap.serving && snap.pid == worker.pid

          snap.busy_threads.positive? ? "busy" : "idle"
        end

        def histogram(nr, kind)
          counts, sum = @scoreboard.histogram(nr, kind)
          { "counts" => counts, "sum" => sum }
        end

        def listeners
          listeners = @master.listeners
          depths = @queues.depths(listeners.map(&:io))
          listeners.map do |listener|
            current, max = depths[listener.io]
            { "address" => listener.address, "queue" => current, "queue_max" => max }
          end
        end
      end
    end
  end
end
