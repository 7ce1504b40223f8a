# frozen_string_literal: true

module Narwhal
  class Master
    module Upgrade
      # A master started by USR2, until it has proved itself to the master
      # that started it: every one of its workers serves (each answered the
      # upgrade's health path with 200 first, when it has one) before the
      # deadline the old master set (upgrade_timeout). It tells the old
      # master through the Channel: `serving` at its first ready worker,
      # then `ready`, or `failed` with the reason, and gives up.
      #
      # The terms are the old master's (its configuration runs the
      # upgrade it starts): a broken new release cannot loosen them.
      class Probation
        # The new master's probation, nil when it was not started by USR2.
        def self.take(logger, env = ENV)
          channel = Channel.take(env)
          channel && new(channel, logger)
        end

        def initialize(channel, logger, clock: Clock)
          @channel = channel
          @terms = channel.terms
          @logger = logger
          @clock = clock
          @started = @terms["started"] || clock.now # USR2
          @verdict = nil # :ready, :failed
          path = @terms["health_path"]
          @health_check = path && HealthCheck.new(path, @terms["health_headers"] || {})
        end

        def pending?
          @verdict.nil?
        end

        def old_pid
          @terms["old_pid"]
        end

        # What each new worker checks before it takes a connection, while
        # the verdict is pending.
        def health_check
          pending? ? @health_check : nil
        end

        # With a deadline the unit (systemd) is claimed only once the
        # upgrade succeeded: a new master that then gives up leaves the old
        # one the main process.
        def withholds_ready?
          pending? && !@terms["deadline"].nil?
        end

        # Whether a stop now gives the upgrade up rather than stopping the
        # service: a deadline is pending and the old master is there to
        # serve on. Without a deadline a stop is the ordinary one.
        def stop_gives_up?
          withholds_ready? && !old_master_gone?
        end

        # Its first worker serves.
        def serving
          @channel.tell(:serving) if pending?
        end

        # On each pass of the new master's loop (workers: its WorkerTable):
        # :ready once every worker serves, the reason once the deadline
        # passed, else nil.
        def judge(workers, count)
          return nil unless pending?

          ready = workers.count { |w| w.ready && !w.quitting }
          return succeed(ready) if ready >= count
          return alone if old_master_gone?

          deadline = @terms["deadline"]
          return nil if deadline.nil? || @clock.now < deadline

          error = workers.last_boot_error
          "#{ready} of #{count} workers ready within upgrade_timeout #{@terms['timeout']}s" \
            "#{booting(workers)}#{error && "; last boot failure: #{error}"}"
        end

        # It gives up (the deadline, no worker could boot, a stop): the old
        # master is told, and serves on.
        def fail(reason)
          return unless pending?

          @verdict = :failed
          @channel.tell(:failed, reason)
          @channel.close
        end

        # Seconds until the deadline; nil without one.
        def wait(now)
          deadline = @terms["deadline"]
          [deadline - now, 0].max if deadline && pending?
        end

        # In a forked worker: the channel is the master's.
        def forget_in_child
          @channel.close
        end

        private

        def succeed(ready)
          @verdict = :ready
          health = @health_check ? ", each answered GET #{@health_check.path} with 200" : ""
          @logger.info("upgrade: all #{ready} workers ready#{health}, #{format('%.1f', @clock.now - @started)}s " \
                       "after USR2; telling the old master pid=#{old_pid}")
          @channel.tell(:ready)
          @channel.close
          :ready
        end

        # The old master died (INT, TERM, a crash): this master is the
        # server now, whatever its workers do; giving up would leave none.
        def alone
          @verdict = :ready
          @logger.warn("upgrade: the old master pid=#{old_pid} is gone; this master serves on alone")
          @channel.close
          :ready
        end

        # Its parent was the old master: the fork USR2 exec'd.
        def old_master_gone?
          Process.ppid != old_pid
        end

        def booting(workers)
          waiting = workers.reject { |w| w.ready || w.quitting }
          waiting.empty? ? "" : " (not ready: #{waiting.map { |w| "worker=#{w.nr} pid=#{w.pid}" }.join(', ')})"
        end
      end
    end
  end
end
