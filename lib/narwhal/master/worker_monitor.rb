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

      # A worker on one request for longer than `timeout` seconds is killed
      # (and replaced by the master); idle workers never time out. The kill
      # takes the worker's other requests with it (its other threads'): the
      # log line says how many were in flight just before it.
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

        def breach(worker, scoreboard)
          busy = scoreboard.busy_for(worker.nr)
          return unless busy && busy > @seconds

          others = [scoreboard.snapshot(worker.nr).busy_threads - 1, 0].max
          "timeout (#{busy.round(3)}s > #{@seconds}s), killing; #{others_in_flight(others)}"
        end

        private

        def others_in_flight(count)
          case count
          when 0 then "no other request in flight"
          when 1 then "1 other request in flight dies with it"
          else "#{count} other requests in flight die with it"
          end
        end
      end

      # The policies a configuration asks for (built again on HUP).
      def self.for(config, scoreboard)
        policies = [Timeout.new(config[:timeout])]
        if config[:worker_memory_limit]
          policies << MemoryLimit.new(config[:worker_memory_limit], pss: config[:worker_memory_pss],
                                                                    interval: config[:worker_memory_check_interval])
        end
        if config[:worker_max_requests]
          policies << RequestLimit.new(config[:worker_max_requests], config[:worker_max_requests_jitter])
        end
        new(scoreboard, policies, config.logger)
      end

      def initialize(scoreboard, policies, logger)
        @scoreboard = scoreboard
        @policies = policies
        @logger = logger
      end

      # The longest the master may sleep between two checks.
      def interval
        @policies.map(&:interval).min
      end

      # Yields each worker that must go with the signal to send and the
      # policy, once per worker: the first policy it breaches decides. A
      # worker already retiring is not retired again (but still killed
      # past its timeout).
      def check(workers)
        policies = @policies.select { |policy| policy.due?(Clock.now) }
        workers.each do |worker|
          policies.each do |policy|
            next if policy.signal == :QUIT && (worker.quitting || worker.recycling)

            reason = policy.breach(worker, @scoreboard)
            next unless reason

            # a kill cuts requests; a recycle is routine
            level = policy.signal == :KILL ? :error : :warn
            @logger.public_send(level, "worker=#{worker.nr} pid=#{worker.pid} #{reason}")
            yield worker, policy.signal, policy
            break
          end
        end
      end
    end
  end
end
