# frozen_string_literal: true

module Narwhal
  class Master
    # What the master enforces on its workers on every pass of its loop,
    # read from the scoreboard the workers write (no signal, pipe or system
    # call on the request path). Each policy says why a worker must go, or
    # nil, and with which signal; the monitor logs the reason and hands the
    # worker and signal back to the master, which sends it.
    #
    # `timeout` kills (KILL). `worker_memory_limit` (MemoryLimit) and
    # `worker_max_requests` (RequestLimit) retire (QUIT): the master hands
    # those workers to its Recycler, which replaces them before they go.
    # A policy answers signal, interval, due?(now) (whether to look on
    # this pass) and breach(worker, scoreboard).
    class WorkerMonitor
      autoload :MemoryLimit, "narwhal/master/worker_monitor/memory_limit"
      autoload :RequestLimit, "narwhal/master/worker_monitor/request_limit"
      # Why a worker was killed for `timeout`, as the log line says it and
      # the after_worker_timeout hook receives it: seconds on its oldest
      # request, the limit, that request's method and path (from the
      # scoreboard, truncated; nil when it finished meanwhile) and how many
      # other requests died with it.
      TimeoutInfo = Struct.new(:elapsed, :timeout, :request_method, :path, :other_requests, keyword_init: true) do
        def to_s
          request = request_method ? " on #{request_method} #{path}" : ""
          "timeout (#{elapsed.round(3)}s > #{timeout}s)#{request}, killing; #{others_in_flight}"
        end

        private

        def others_in_flight
          case other_requests
          when 0 then "no other request in flight"
          when 1 then "1 other request in flight dies with it"
          else "#{other_requests} other requests in flight die with it"
          end
        end
      end

      # A worker on one request for longer than `timeout` seconds is killed
      # (and replaced by the master); idle workers never time out. The kill
      # takes the worker's other requests with it (its other threads'): the
      # log line names the request that ran too long and says how many
      # others were in flight just before it.
      class Timeout
        def initialize(seconds)
          @seconds = seconds
        end

        def signal
          :KILL
        end

        # How often the master must look: twice per timeout.
        def interval
          @seconds / 2.0
        end

        def due?(_now)
          true
        end

        # A TimeoutInfo, or nil while the worker is within its timeout.
        def breach(worker, scoreboard)
          busy = scoreboard.busy_for(worker.nr)
          return unless busy && busy > @seconds

          snapshot = scoreboard.snapshot(worker.nr)
          oldest = snapshot.requests_in_flight&.first
          oldest = nil if oldest&.request_method&.empty? # a request started without its name
          TimeoutInfo.new(elapsed: busy, timeout: @seconds, request_method: oldest&.request_method,
                          path: oldest&.path, other_requests: [snapshot.busy_threads - 1, 0].max)
        end
      end

      # The policies a configuration asks for (built again on HUP). server:
      # the master (its tally, and what its hooks receive), nil in tests.
      def self.for(config, scoreboard, server = nil)
        policies = [Timeout.new(config[:timeout])]
        if config[:worker_memory_limit]
          policies << MemoryLimit.new(config[:worker_memory_limit], pss: config[:worker_memory_pss],
                                                                    interval: config[:worker_memory_check_interval])
        end
        if config[:worker_max_requests]
          policies << RequestLimit.new(config[:worker_max_requests], config[:worker_max_requests_jitter])
        end
        new(scoreboard, policies, config.logger, server: server, on_timeout: config[:after_worker_timeout])
      end

      # on_timeout: called as after_worker_timeout is, once a worker was
      # signalled for its timeout.
      def initialize(scoreboard, policies, logger, server: nil, on_timeout: nil)
        @scoreboard = scoreboard
        @policies = policies
        @logger = logger
        @server = server
        @on_timeout = on_timeout
      end

      # The longest the master may sleep between two checks.
      def interval
        @policies.map(&:interval).min
      end

      # Yields each worker that must go with the signal to send and the
      # policy, once per worker: the first policy it breaches decides. A
      # worker already retiring is not retired again (but still killed
      # past its timeout). A killed worker is not judged again: passes
      # may see it before it is reaped, and its kill is logged, hooked and
      # counted once.
      def check(workers)
        policies = @policies.select { |policy| policy.due?(Clock.now) }
        workers.each do |worker|
          next if worker.killed

          policies.each do |policy|
            next if policy.signal == :QUIT && (worker.quitting || worker.recycling)

            reason = policy.breach(worker, @scoreboard)
            next unless reason

            # a kill cuts requests; a recycle is routine
            level = policy.signal == :KILL ? :error : :warn
            @logger.public_send(level, "worker=#{worker.nr} pid=#{worker.pid} #{reason}")
            worker.killed = true if policy.signal == :KILL
            yield worker, policy.signal, policy
            timed_out(worker, reason) if reason.is_a?(TimeoutInfo)
            break
          end
        end
      end

      private

      # The kill is sent: counted for /metrics, then the operator's hook. A
      # hook that raises is logged; the master carries on.
      def timed_out(worker, info)
        @server&.tally&.count(:timeout_kills)
        @on_timeout&.call(@server, worker, info)
      rescue StandardError, ScriptError => e
        @logger.error("after_worker_timeout failed: #{ErrorMessage.for(e)}#{ErrorMessage.backtrace(e)}")
      end
    end
  end
end
