# frozen_string_literal: true

module Narwhal
  class Master
    # The kernel has no room for another process (fork's EAGAIN).
    class ForkRefused < StandardError; end

    # The master's fork, which fails instead of waiting forever. When the
    # kernel answers EAGAIN (a pids cgroup at pids.max: a Kubernetes pod's
    # pids limit, systemd's TasksMax=, request threads count too; or
    # RLIMIT_NPROC), Ruby's fork sleeps a second and tries again, without
    # end: the master's loop would stop there, with no reaping, no
    # `timeout` and no signals. Ruby has no fork that gives up, so a
    # watchdog thread raises ForkRefused into the forking thread once a
    # fork has taken `patience` seconds.
    #
    # ForkRefused gets in only where the forking thread blocks
    # (handle_interrupt :on_blocking), that is in the sleep between two
    # tries: never between the child's birth and its pid reaching the
    # caller. One raised as the fork succeeded is dropped, in the parent
    # and in the child (which inherits it pending).
    #
    # The watchdog starts with the first fork and lives as long as the
    # master: a thread started for each fork would need a task of its own,
    # just what the kernel has no room for. (So the master counts one task
    # more than its main thread against pids.max and RLIMIT_NPROC.)
    class Forker
      PATIENCE = 0.5 # seconds; a fork takes milliseconds, Ruby's retry sleeps 1 s
      DEFERRED = { ForkRefused => :never }.freeze
      WHEN_BLOCKED = { ForkRefused => :on_blocking }.freeze
      IMMEDIATE = { ForkRefused => :immediate }.freeze

      # explain: what the ForkRefused message adds (the limits in force).
      def initialize(patience: PATIENCE, explain: -> { ForkLimits.describe })
        @patience = patience
        @explain = explain
        @lock = Mutex.new
        @wakeup = ConditionVariable.new
        @forking = nil # the thread in fork, while it is
        @refused = false # the watchdog raised into the last fork
        @deadline = nil
        @watchdog = nil
      end

      # The child's pid; the block runs in the child. Raises ForkRefused,
      # or what fork raised (Errno::ENOMEM once Ruby's GC did not help).
      def fork(&child)
        start_watchdog
        bounded_fork(&child)
      rescue ThreadError # no room for the watchdog either
        raise ForkRefused, refusal
      rescue SystemCallError => e
        # Ruby's fork swallows the watchdog's raise and fails with whatever
        # errno it has then (EAGAIN, or EINTR when a signal came meanwhile)
        raise ForkRefused, refusal if @refused || e.is_a?(Errno::EAGAIN)

        raise
      end

      # A ForkRefused raised too late is pending here: taken and dropped.
      def self.drop_pending
        Thread.handle_interrupt(IMMEDIATE) { Thread.pass }
      rescue ForkRefused
        nil
      end

      private

      def bounded_fork(&child)
        Thread.handle_interrupt(DEFERRED) do
          pid = begin
            arm
            Thread.handle_interrupt(WHEN_BLOCKED) do
              Process.fork do
                self.class.drop_pending
                child.call
              end
            end
          ensure
            disarm
          end
          self.class.drop_pending
          pid
        end
      end

      def start_watchdog
        @watchdog ||= Thread.new { watch }.tap { |t| t.name = "fork watchdog" }
      end

      def arm
        @lock.synchronize do
          @forking = Thread.current
          @refused = false
          @deadline = Clock.now + @patience
          @wakeup.signal
        end
      end

      def disarm
        @lock.synchronize do
          @forking = nil
          @wakeup.signal
        end
      end

      def watch
        @lock.synchronize do
          while true
            @wakeup.wait(@lock) until @forking
            left = @deadline - Clock.now
            next @wakeup.wait(@lock, left) if left.positive?

            @forking.raise(ForkRefused)
            @refused = true
            @forking = nil
          end
        end
      end

      # The limits in force help the operator see which one was reached.
      def refusal
        limits = @explain.call
        "the kernel refused a new process (resource temporarily unavailable)#{"; #{limits}" if limits}"
      end
    end
  end
end
