# frozen_string_literal: true

module Narwhal
  class Master
    # A USR2 upgrade, as parts of the master (its state is the master's),
    # on both sides of the Channel between the two generations. Reexec
    # forks and execs; this decides.
    #
    # The old master runs the upgrade by its own configuration: it sets the
    # deadline (upgrade_timeout), the health path and the retirement
    # (upgrade_retire_old), follows what the new master says (Successor),
    # holds back what would take its workers away until the verdict, takes
    # back what it gave when the new master fails or dies, and with
    # upgrade_retire_old hands over by itself once the new master is ready
    # (Handoff).
    #
    # The new master serves on probation (Probation): it tells the old one
    # when its first worker serves and when all do, or gives up at the
    # deadline and exits 1, having served nothing a health check refused
    # (HealthCheck, in each worker).
    module Upgrade
      autoload :Channel, "narwhal/master/upgrade/channel"
      autoload :Handoff, "narwhal/master/upgrade/handoff"
      autoload :HealthCheck, "narwhal/master/upgrade/health_check"
      autoload :Probation, "narwhal/master/upgrade/probation"
      autoload :Successor, "narwhal/master/upgrade/successor"

      # For /ready: the new master USR2 started has a worker serving, so
      # the service is ready whichever master answers the probe.
      def successor_serving?
        @successor&.serving? || false
      end

      private

      # --- the old master ---

      # USR2: the new master gets the listeners, the control socket and
      # the channel, with this configuration's terms.
      def start_upgrade
        # with a deadline pending, this master may yet give up: not a parent to lean on
        return @logger.error("USR2 ignored: this master's own upgrade is not settled yet") if @probation&.withholds_ready?

        channel = Channel.open(upgrade_terms)
        before = @reexec.pid
        @pid_file = @reexec.start(@pid_file, @listener_set, control: @control, channel: channel) do
          @notify.before_exec
          @config[:before_exec].call(self)
        end
        return channel.close if @reexec.pid.nil? || @reexec.pid == before

        @successor = Successor.new(@reexec.pid, channel, @worker_processes, @logger)
        @notify.status("starting a new master pid=#{@reexec.pid}")
      end

      def upgrade_terms
        timeout = @config[:upgrade_timeout]
        now = Clock.now # the one monotonic clock of the machine: the new master reads it too
        { "started" => now, "deadline" => timeout && now + timeout, "timeout" => timeout, "old_pid" => Process.pid,
          "health_path" => @config[:upgrade_health_path], "health_headers" => @config[:upgrade_health_headers] }
      end

      # On each pass: what the new master said, and the hand-over's next step.
      def follow_successor
        hear_successor
        step_handoff
      end

      def hear_successor
        @successor&.events(Clock.now)&.each do |event, reason|
          case event
          when :serving then @logger.info("upgrade: the new master pid=#{@successor.pid} serves (a first worker)")
          when :ready then successor_ready
          when :failed then successor_gone("the new master pid=#{@successor.pid} gave up: #{reason}")
          when :overdue then successor_overdue
          end
        end
      end

      def successor_ready
        retire = @config[:upgrade_retire_old]
        @logger.info("upgrade succeeded: the new master pid=#{@successor.pid} serves with all its workers" \
                     "#{retire ? '; retiring the old workers one at a time (upgrade_retire_old)' : ''}")
        @handoff = Handoff.new(@successor.pid, @logger) if retire
        held = @successor.held_back.dup
        @successor.held_back.clear
        held.each { |sig| handle_signal(sig) } # as they came, now that nothing holds them
      end

      def successor_overdue
        Process.kill(:KILL, @successor.pid)
        successor_gone("the new master pid=#{@successor.pid} gave no verdict within upgrade_timeout " \
                       "(#{@successor.timeout}s, +#{Successor::GRACE}s); killed it")
      rescue Errno::ESRCH
        nil # gone already: reaped as a dead successor
      end

      # The upgrade is over without a new master (it gave up, was killed,
      # died): what was held back is dropped, the workers taken away come
      # back, and systemd hears that this master is the service again.
      def successor_gone(reason)
        return unless @successor.lose

        @handoff = nil
        @logger.error("upgrade failed: #{reason}; the old master pid=#{Process.pid} serves on#{dropped_note}")
        @successor.held_back.clear
        if !@shutdown.stopping? && @worker_processes < @successor.worker_processes
          @worker_processes = @successor.worker_processes
          @logger.info("worker_processes back to #{@worker_processes}, as before the upgrade")
        end
        @notify.upgrade_failed(reason, @worker_processes)
      end

      def dropped_note
        held = @successor.held_back
        held.empty? ? "" : " (dropping the #{held.join(', ')} held back for it)"
      end

      # USR2's child was reaped: Reexec put the pid file back.
      def successor_exited(status)
        return unless @successor

        hear_successor # its last word (why it gave up) comes before its exit
        successor_gone("the new master pid=#{@successor.pid} exited (#{ErrorMessage.exit_status(status)})")
        @successor.close
        @successor = nil
      end

      def step_handoff
        return unless @handoff && !@shutdown.stopping?

        @worker_processes = @handoff.step(@workers, @worker_processes)
        return unless @handoff.done?(@workers, @worker_processes)

        stop(:QUIT, "upgrade: every old worker retired")
      end

      # --- the new master ---

      # On each pass: the verdict once there is one. The unit is claimed
      # (READY=1, MAINPID=) once the upgrade succeeded, when it was
      # withheld until then.
      def judge_probation
        return unless @probation&.pending?

        withheld = @probation.withholds_ready?
        verdict = @probation.judge(@workers, @worker_processes) or return
        return abandon_upgrade(verdict) unless verdict == :ready

        @notify.ready(@worker_processes, "upgrade from pid=#{@probation.old_pid} succeeded") if withheld
      end

      # The new master gives up: the old one is told and serves on. Workers
      # not ready yet never took a connection and may hang in their boot:
      # KILL; ready ones finish what they took (sig). Their listeners stay
      # open in the old generation (no let-go), and so does the control
      # socket, whose probes go to the old master alone from now on.
      def abandon_upgrade(reason, sig = :QUIT)
        @logger.error("upgrade failed: #{reason}; exiting, the old master pid=#{@probation.old_pid} serves on")
        @probation.fail(reason)
        @control&.stop(unlink: false, hand_over: true)
        @shutdown.stop(sig, @config, Clock.now, exit_status: 1)
        @workers.read_reports # a worker reports ready before its first accept
        @workers.each { |worker| @workers.signal(worker, worker.ready ? sig : :KILL) }
      end
    end
  end
end
