# frozen_string_literal: true

require "socket"

module Narwhal
  class Master
    # systemd's notify protocol (sd_notify(3)) for a `Type=notify` unit, sent
    # by the master when NOTIFY_SOCKET names a socket (a path, or `@name` for
    # an abstract one): READY=1 with MAINPID= once a worker serves, STATUS=
    # lines, RELOADING=1 and READY=1 around HUP, STOPPING=1 at the start of a
    # stop, and WATCHDOG=1 every WATCHDOG_USEC / 2 from the master's loop, so
    # that a stuck master stops pinging and systemd restarts it.
    #
    # USR2: the new master sends MAINPID= with its own pid once its first
    # worker serves, or with upgrade_timeout once all of them do
    # (systemd takes it with NotifyAccess=all); when the old master is then
    # told to leave, it sends MAINPID= of the new one itself (accepted from
    # the main process under NotifyAccess=main too) and says nothing more,
    # STOPPING=1 least of all: the service goes on. A new master that gives
    # up says nothing; the old one says it serves on, with MAINPID= its own.
    #
    # Without NOTIFY_SOCKET every method does nothing. Workers forget it
    # (forget_in_child), so neither narwhal nor the app notifies from them.
    class SystemdNotify
      ENV_NAMES = %w[NOTIFY_SOCKET WATCHDOG_USEC WATCHDOG_PID].freeze

      # env: the master's environment; nothing is removed from it (a USR2
      # re-exec needs it).
      def initialize(logger, env = ENV)
        @logger = logger
        @address = address(env["NOTIFY_SOCKET"])
        @interval = @address && watchdog_interval(env)
        @next_ping = Clock.now
        @last_error = nil
        return unless @address

        watchdog = @interval ? ", WATCHDOG=1 every #{@interval.round(3)}s" : ""
        @logger.info("systemd notify: NOTIFY_SOCKET=#{env['NOTIFY_SOCKET']}#{watchdog}")
      end

      def enabled?
        !@address.nil?
      end

      # Workers serve (at boot, after HUP, once a USR2 upgrade succeeded:
      # note says so); MAINPID= makes a new master (USR2) or a daemonized
      # one (-D) the unit's main process.
      def ready(workers, note = nil)
        notify("READY=1", "MAINPID=#{Process.pid}", "STATUS=serving, worker_processes #{workers}#{note && "; #{note}"}")
      end

      # In the old master: the new master USR2 started gave up or died, and
      # this one is the service again (MAINPID= back, should the new one
      # have claimed it).
      def upgrade_failed(reason, workers)
        notify("READY=1", "MAINPID=#{Process.pid}",
               "STATUS=serving, worker_processes #{workers}; upgrade failed: #{reason}")
      end

      def status(text)
        notify("STATUS=#{text}")
      end

      # HUP; READY=1 follows once the configuration is read again (ready).
      # systemd >= 253 needs the monotonic clock to match the two.
      def reloading
        usec = Process.clock_gettime(Process::CLOCK_MONOTONIC, :microsecond)
        notify("RELOADING=1", "MONOTONIC_USEC=#{usec}", "STATUS=reloading the configuration")
      end

      # At the start of any stop. successor: the pid of the master started
      # by USR2, still running: the unit is handed to it instead.
      def stopping(how, successor: nil)
        if successor
          notify("MAINPID=#{successor}", "STATUS=handed over to the new master pid=#{successor}")
          @address = nil # what this master does from now on is not the unit's business
        else
          notify("STOPPING=1", "STATUS=stopping (#{how})")
        end
      end

      # Seconds until the next WATCHDOG=1 is due; nil without a watchdog.
      def watchdog_wait
        @interval && [@next_ping - Clock.now, 0].max
      end

      # From the master's loop: WATCHDOG=1 when due.
      def watchdog
        return unless @interval && @address && Clock.now >= @next_ping

        @next_ping = Clock.now + @interval
        notify("WATCHDOG=1")
      end

      # In USR2's child before exec: systemd named this master in
      # WATCHDOG_PID; the new master (this very process once exec'd) pings.
      def before_exec
        ENV["WATCHDOG_PID"] = Process.pid.to_s if ENV.key?("WATCHDOG_PID")
      end

      # In a forked worker.
      def forget_in_child
        ENV_NAMES.each { |name| ENV.delete(name) }
        @address = nil
        @interval = nil
      end

      private

      # "/path" or "@abstract"; anything else is logged and ignored.
      def address(value)
        return nil if value.nil? || value.empty?
        return Socket.sockaddr_un("\0#{value[1..]}") if value.start_with?("@")
        return Socket.sockaddr_un(value) if value.start_with?("/")

        @logger.warn("systemd notify: NOTIFY_SOCKET=#{value.inspect} is neither a path nor @name; not notifying")
        nil
      rescue ArgumentError => e
        @logger.warn("systemd notify: NOTIFY_SOCKET=#{value.inspect}: #{e.message}; not notifying")
        nil
      end

      # Half of WATCHDOG_USEC, when WATCHDOG_PID is unset or names this process.
      def watchdog_interval(env)
        usec = Integer(env["WATCHDOG_USEC"].to_s, 10, exception: false)
        return nil unless usec&.positive?

        pid = env["WATCHDOG_PID"]
        return nil if pid && !pid.empty? && Integer(pid, 10, exception: false) != Process.pid

        usec / 2_000_000.0
      end

      # One datagram; a failure is logged once until a send works again.
      def notify(*lines)
        return unless @address

        socket = Socket.new(:UNIX, :DGRAM)
        socket.sendmsg(lines.map { |l| l.tr("\n", " ") }.join("\n"), 0, @address)
        @last_error = nil
      rescue SystemCallError, IOError => e
        message = ErrorMessage.for(e)
        @logger.warn("systemd notify: sending to NOTIFY_SOCKET failed: #{message}") unless message == @last_error
        @last_error = message
      ensure
        socket&.close
      end
    end
  end
end
