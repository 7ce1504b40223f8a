# frozen_string_literal: true

module Narwhal
  class Master
    # A USR2 upgrade, as parts of the master (its state is the master's),
    # on both sides of the Channel between the two generations. Reexec
    # forks and execs; this follows.
    #
    # The old master follows what the new master says (Successor): while
    # the new master serves, the old one is ready whether or not it still
    # has workers of its own. The new master serves on probation
    # (Probation): it tells the old one when its first worker serves and
    # when all do, or that it gave up.
    module Upgrade
      autoload :Channel, "narwhal/master/upgrade/channel"
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
      # the channel.
      def start_upgrade
        channel = Channel.open(upgrade_terms)
        before = @reexec.pid
        @pid_file = @reexec.start(@pid_file, @listener_set, control: @control, channel: channel) do
          @notify.before_exec
          @config[:before_exec].call(self)
        end
        return channel.close if @reexec.pid.nil? || @reexec.pid == before

        @successor = Successor.new(@reexec.pid, channel, @logger)
        @notify.status("starting a new master pid=#{@reexec.pid}")
      end

      def upgrade_terms
        # the one monotonic clock of the machine: the new master reads it too
        { "started" => Clock.now, "old_pid" => Process.pid }
      end

      # On each pass: what the new master said.
      def follow_successor
        @successor&.events&.each do |event, reason|
          case event
          when :serving then @logger.info("upgrade: the new master pid=#{@successor.pid} serves (a first worker)")
          when :ready
            @logger.info("upgrade succeeded: the new master pid=#{@successor.pid} serves with all its workers")
          when :failed then @logger.error("upgrade failed: the new master pid=#{@successor.pid} gave up: #{reason}")
          end
        end
      end

      # USR2's child was reaped: Reexec put the pid file back.
      def successor_exited
        return unless @successor

        follow_successor # its last word (why it gave up) comes before its exit
        @successor.close
        @successor = nil
      end

      # --- the new master ---

      # On each pass: the verdict once there is one.
      def judge_probation
        @probation&.judge(@workers, @worker_processes)
      end
    end
  end
end
