# frozen_string_literal: true

module Narwhal
  class Master
    # The master's workers, by pid: forking the missing ones, reaping the
    # ones that exited, signalling them, and their reports (WorkerReports:
    # ready, or why a boot failed). While workers fail to boot,
    # RespawnPolicy sets the pace of forks and says when to give up.
    #
    # The hooks run here (before_fork, after_worker_exit) receive
    # `hook_server`, the master, as Unicorn's receive its HttpServer.
    class WorkerTable
      include Enumerable

      attr_writer :config # HUP's new one

      # on_first_ready: called once the first worker ever is ready;
      # on_retire: with a worker that asks to be replaced. tally: where
      # respawns are counted (Tally). The block runs in each forked child
      # with the Worker and the WorkerReports, and never returns.
      def initialize(config, scoreboard, hook_server, on_first_ready:, on_retire: nil, tally: nil, forker: Forker.new,
                     &child)
        @config = config
        @on_retire = on_retire
        @forker = forker
        @scoreboard = scoreboard
        @hook_server = hook_server
        @on_first_ready = on_first_ready
        @child = child
        @by_pid = {}
        @respawn = RespawnPolicy.new
        @reports = WorkerReports.new
        @tally = tally
        @exited = [] # worker numbers whose process exited and is not replaced yet
      end

      def each(&block)
        @by_pid.each_value(&block)
      end

      def empty?
        @by_pid.empty?
      end

      def logger
        @config.logger
      end

      # The workers now, as an Array: one C call, so another thread (the
      # control listener's) never sees the table change under it.
      def snapshot
        @by_pid.values
      end

      # What the master's sleep watches besides its signals.
      def reports_reader
        @reports.reader
      end

      # Forks a worker for each place below `count` that has none, as far
      # as the respawn policy allows now. A place's own number is used
      # unless a stand-in (Worker#place) has it; then a spare one. After a
      # fork that failed the others wait for the respawn policy's delay.
      def spawn_missing(count)
        allowance = @respawn.allowance(Clock.now)
        taken = map(&:place)
        (0...count).each do |place|
          next if taken.include?(place)
          break if allowance&.zero?
          break unless spawn_for(place, count)

          allowance &&= allowance - 1
        end
      end

      # Extra workers (after TTOU or a smaller HUP) and retiring ones get
      # QUIT again on every pass: one forked an instant ago may not have its
      # handlers yet and would miss a single signal.
      def retire_beyond(count)
        each { |worker| signal(worker, :QUIT) if worker.quitting || worker.place >= count }
      end

      # Forks a worker to take old's place while old serves on; returns it,
      # or nil while forks are held back (workers failing to boot). Its
      # number is its place's own when free (old may be a stand-in), else
      # a spare one from `from` (worker_processes) up.
      def spawn_stand_in(old, from:)
        return nil if @respawn.allowance(Clock.now)&.zero?

        spawn_for(old.place, from)
      end

      # The number a new worker for the place gets: the place's own while
      # no live worker has it, else the lowest free one from `from` up;
      # nil when every scoreboard slot is taken.
      def number_for(place, from)
        taken = map(&:nr)
        return place unless taken.include?(place)

        (from...Scoreboard::MAX_SLOTS).find { |nr| !taken.include?(nr) }
      end

      # Whether this very worker (not another with its number) is alive.
      def alive?(worker)
        @by_pid[worker.pid].equal?(worker)
      end

      # Reaps every exited child. A worker's slot is cleared and its hook
      # run, a failed boot logged; any other child (USR2's new master) is
      # yielded with its status.
      def reap(stopping:)
        loop do
          pid, status = Process.wait2(-1, Process::WNOHANG)
          break unless pid

          read_reports # a worker's report is in the pipe before it exits
          worker = @by_pid.delete(pid)
          worker ? exited(worker, status, stopping) : yield(pid, status)
        end
      rescue Errno::ECHILD
        nil
      end

      def read_reports
        @reports.drain.each do |pid, kind, message|
          case kind
          when "ready"
            @by_pid[pid]&.ready = true
            @on_first_ready.call if @respawn.ready(pid)
          when "failed" then @respawn.boot_error(pid, message)
          when "retire" then @by_pid[pid]&.then { |worker| @on_retire&.call(worker) }
          end
        end
      end

      # QUIT marks the worker as retiring (see retire_beyond).
      def signal(worker, sig)
        worker.quitting = true if sig == :QUIT
        Process.kill(sig, worker.pid)
      rescue Errno::ESRCH
        nil
      end

      def signal_all(sig)
        each { |worker| signal(worker, sig) }
      end

      # Seconds until a held-back fork is due; nil when none is waiting.
      def respawn_wait
        @respawn.wait(Clock.now)
      end

      # The reason to give up, when no worker ever became ready and trying
      # again will not help; else nil.
      def give_up_reason
        return nil unless @respawn.give_up?

        "no worker could boot (#{@respawn.rounds} attempts), exiting: #{@respawn.last_error}"
      end

      # Workers that failed to boot since one was last ready (RespawnPolicy).
      def boot_failures
        @respawn.failures
      end

      # Whether a worker of this master was ever ready.
      def ever_ready?
        @respawn.ever_ready?
      end

      # Why the last worker that failed to boot did, since one was last
      # ready; nil when none failed.
      def last_boot_error
        @respawn.last_error
      end

      # HUP: the app may have been fixed, its workers start at once.
      def reset_respawn
        @respawn.reset
      end

      # In a forked worker: its siblings and the reports' read end are not
      # its business.
      def forget_in_child
        @reports.close_reader
        @by_pid.clear
      end

      private

      # A worker for the place (see number_for); nil when no number is free
      # or the worker could not be forked.
      def spawn_for(place, from)
        nr = number_for(place, from)
        nr && spawn(Worker.new(nr).tap { |w| w.stand_in_for = place unless nr == place })
      end

      # The worker, forked; nil when before_fork raised or fork failed.
      def spawn(worker)
        @scoreboard.reset(worker.nr)
        @scoreboard.span = worker.nr + 1 # siblings look this far for idle threads
        worker.threads = @config[:threads]
        step = "before_fork"
        @config[:before_fork].call(@hook_server, worker)
        step = "fork"
        worker.pid = @forker.fork { @child.call(worker, @reports) }
        @tally&.count(:respawns) if @exited.delete(worker.nr)
        @by_pid[worker.pid] = worker
        @respawn.spawned(worker.pid)
        worker
      rescue StandardError, ScriptError => e
        not_forked(worker, step, e)
      end

      # A failed fork is a failed round for the respawn policy: the place
      # stays empty, and is tried again after its delay.
      def not_forked(worker, step, error)
        @scoreboard.reset(worker.nr)
        failure = "#{step} failed: #{ErrorMessage.for(error)}"
        outlook = @respawn.fork_failed(failure, Clock.now)
        # the hook's backtrace points at the operator's code; fork's at ours
        trace = step == "fork" ? "" : ErrorMessage.backtrace(error)
        logger.error("worker=#{worker.nr} #{failure}; not forked, #{outlook}#{trace}")
        nil
      end

      def exited(worker, status, stopping)
        # a recycled worker's replacement serves already: none is forked for it
        @exited << worker.nr unless stopping || worker.recycling || @exited.include?(worker.nr)
        @scoreboard.reset(worker.nr)
        after_worker_exit(worker, status)
        failure = @respawn.exited(worker, status, Clock.now, stopping: stopping)
        @config.logger.error(failure) if failure
      end

      # Logged when it raises: the other exited workers are still reaped.
      def after_worker_exit(worker, status)
        @config[:after_worker_exit].call(@hook_server, worker, status)
      rescue StandardError, ScriptError => e
        logger.error("worker=#{worker.nr} pid=#{worker.pid} after_worker_exit failed: #{ErrorMessage.for(e)}" \
                     "#{ErrorMessage.backtrace(e)}")
      end
    end
  end
end
