# frozen_string_literal: true

module Narwhal
  class Master
    # What the master enforces on its workers on every pass of its loop,
    # read from the scoreboard the workers write (no signal, pipe or system
    # call on the request path). Each policy says why a worker must go, or
    # nil, and with which signal; the monitor logs the reason and hands the
    # worker and signal back to the master, which sends it.
    #
    # `timeout` is the policy today. A memory limit is one more object with
    # the same three methods (reading each worker's memory, retiring it with
    # QUIT), added to the list that WorkerMonitor.for builds.
    class WorkerMonitor
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
        new(scoreboard, [Timeout.new(config[:timeout])], config.logger)
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

      # Yields each worker that must go with the signal to send, once per
      # worker: the first policy it breaches decides.
      def check(workers)
        workers.each do |worker|
          @policies.each do |policy|
            reason = policy.breach(worker, @scoreboard)
            next unless reason

            @logger.error("worker=#{worker.nr} pid=#{worker.pid} #{reason}")
            yield worker, policy.signal
            break
          end
        end
      end
    end
  end
end
