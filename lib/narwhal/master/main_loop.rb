# frozen_string_literal: true

module Narwhal
  class Master
    # The master's loop: each pass reaps, handles the queued signals,
    # applies the policies (timeout, memory and request limits, recycling,
    # the worker count), then sleeps on the self-pipe; a pass that raises is
    # logged and the next one waits.
    module MainLoop
      # Runs the master loop; returns the exit status.
      def join
        status = nil
        status = guarded_pass until status
        shutdown # outside the guard: a shutdown that raises ends the master
        status
      ensure
        @signals&.restore # for a program that runs the master inside it (rackup)
      end

      private

      # One pass of the loop; the exit status once the master is done, else nil.
      def pass
        @notify.watchdog # here, so that a master stuck anywhere in its loop stops pinging
        @workers.reap(stopping: @shutdown.stopping?) { |pid, status| reexec_exited(pid, status) }
        follow_successor # before the signals: a QUIT held back for it may be let go
        while (sig = @signals.pop)
          handle_signal(sig)
        end
        return @shutdown.exit_status if @shutdown.stopping? && @workers.empty?

        stop(:QUIT, "drain_delay over") if @shutdown.drain_over?(Clock.now)
        if @shutdown.stopping?
          @workers.signal_all(@shutdown.signal) # again, for any worker that missed it
          @shutdown.kill_stragglers(@workers, @logger, Clock.now)
        else
          reason = @workers.give_up_reason
          return give_up(reason) if reason

          @monitor.check(@workers) do |worker, sig, policy|
            sig == :QUIT ? @recycler.retire(worker, policy.event) : @workers.signal(worker, sig)
          end
          @recycler.step(@worker_processes)
          @workers.retire_beyond(@worker_processes)
          @workers.spawn_missing(@worker_processes)
          judge_probation
        end
        nil
      end

      # The master outlives its own failures: its workers would follow it
      # and the port would refuse connections. Hooks and forks handle theirs
      # where they run (WorkerTable); what reaches here is unexpected: logged
      # with its backtrace, and the next pass waits as after a failed fork
      # (RespawnPolicy's delays), so an error on every pass cannot spin.
      def guarded_pass
        status = pass
        @failed_passes = 0
        sleep_on_pipe unless status
        status
      rescue StandardError => e
        @failed_passes += 1
        delay = RespawnPolicy.delay(@failed_passes)
        @logger.error("master loop failed: #{ErrorMessage.for(e)}; carrying on in #{format('%g', delay)}s" \
                      "#{ErrorMessage.backtrace(e)}")
        @signals.wait(delay)
        nil
      end

      # Also wakes for a worker's report, when a held-back fork is due, and
      # for the USR2 successor's word and deadlines.
      def sleep_on_pipe
        now = Clock.now
        timeout = [@monitor.interval, MAX_SLEEP, @workers.respawn_wait, @notify.watchdog_wait,
                   @shutdown.wait(now), @successor&.wait(now), @probation&.wait(now)].compact.min
        @workers.read_reports if @signals.wait(timeout, [@workers.reports_reader, @successor&.reader].compact)
      end
    end
  end
end
