# frozen_string_literal: true

module Narwhal
  class Master
    # Where the master is in stopping, and when: serving, draining (a
    # graceful TERM's `drain_delay`: the workers serve on while load
    # balancers take the instance out), stopping (workers sent QUIT or
    # TERM) until they are gone; and when the ones still there get KILL.
    class Shutdown
      # Taken while draining: QUIT (stop gracefully now), INT and TERM
      # (stop now), USR1 (logrotate does not know we are leaving).
      WHILE_DRAINING = %w[QUIT INT TERM USR1].freeze
      # Taken while stopping: only a quicker stop.
      WHILE_STOPPING = %w[INT TERM].freeze

      # What the workers were sent (:QUIT or :TERM); nil until stopping.
      attr_reader :signal

      def initialize
        @exit_status = nil
        @signal = nil
        @drain_ends = nil
        @kill_at = nil
      end

      def stopping?
        !@signal.nil?
      end

      # From a graceful TERM (or any stop) on: not ready for new traffic.
      def draining?
        stopping? || !@drain_ends.nil?
      end

      # Whether the master still acts on this signal.
      def takes?(sig)
        return WHILE_STOPPING.include?(sig) if stopping?
        return WHILE_DRAINING.include?(sig) if draining?

        true
      end

      # TERM: with term_graceful, the first one starts the drain (logged)
      # and returns true; else (and for a second TERM) false: stop now.
      def drain(config, logger, now)
        return false if !config[:term_graceful] || draining?

        delay = config[:drain_delay]
        logger.info("TERM received: draining, serving for #{delay}s (drain_delay), then stopping gracefully")
        @drain_ends = now + delay
        true
      end

      # The drain delay has passed and the graceful stop is due.
      def drain_over?(now)
        !stopping? && !@drain_ends.nil? && now >= @drain_ends
      end

      # Seconds until the drain delay ends, for the master's sleep; nil
      # when not draining.
      def wait(now)
        [@drain_ends - now, 0].max if @drain_ends && !stopping?
      end

      # The master's exit status once its workers are gone: the first
      # stop's (1 for a USR2 successor that gave up), else 0.
      def exit_status
        @exit_status || 0
      end

      # sig: what the workers get. After QUIT they have graceful_timeout
      # (by default timeout + KILL_AFTER) to finish, after TERM KILL_AFTER.
      def stop(sig, config, now, exit_status: 0)
        @exit_status ||= exit_status
        @signal = sig
        @kill_at = now + (sig == :QUIT ? self.class.graceful_timeout(config) : KILL_AFTER)
      end

      def self.graceful_timeout(config)
        config[:graceful_timeout] || config[:timeout] + KILL_AFTER
      end

      # Workers still there when their time is up get KILL, and again
      # every KILL_AFTER seconds.
      def kill_stragglers(workers, logger, now)
        return if now < @kill_at

        workers.each do |worker|
          logger.error("worker=#{worker.nr} pid=#{worker.pid} did not stop in time, killing")
          workers.signal(worker, :KILL)
        end
        @kill_at = now + KILL_AFTER
      end
    end
  end
end
