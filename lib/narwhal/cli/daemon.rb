# frozen_string_literal: true

module Narwhal
  class CLI
    # `-D`: the launching process forks, the child starts a new session and
    # forks again (so it can never regain a terminal), and the launcher waits
    # on a pipe: once the first worker is ready it prints the master's pid,
    # where the log goes and how to stop it, and exits 0; if boot fails it
    # prints the master's error and exits 1.
    #
    # A master re-executed by USR2 (it inherits NARWHAL_FD) is already
    # detached: it does not fork again, so the old master keeps watching the
    # new master's own pid.
    class Daemon
      READY = "ready"
      FAILED = "failed"
      SEPARATOR = "\t" # between the lines of one report: the pipe carries one line

      # Returns the Daemon in the master; never returns in the launcher.
      def self.daemonize
        # USR2's new master is detached already; forking again would look to the old master like its death
        return reexecuted if ENV.key?(Listener::Set::FD_ENV)

        launcher = Process.pid.to_s
        rd, wr = IO.pipe
        if fork
          wr.close
          launcher_wait(rd)
        end
        rd.close
        Process.setsid
        exit!(0) if fork
        # systemd's LISTEN_PID names the process it started; its sockets are for this master
        ENV["LISTEN_PID"] = Process.pid.to_s if ENV["LISTEN_PID"] == launcher
        detach_stdio
        new(wr)
      end

      def self.reexecuted
        detach_stdio
        new(nil)
      end

      def self.detach_stdio
        $stdin.reopen(File::NULL)
        # stderr_path / stdout_path reopen these later when configured
        $stdout.reopen(File::NULL, "a")
        $stderr.reopen(File::NULL, "a")
      end

      # One line, not until EOF: a process the app forked may hold the pipe.
      def self.launcher_wait(rd)
        status, *lines = rd.gets.to_s.chomp.split(SEPARATOR)
        lines = lines.map { |l| "narwhal: #{l}" }
        if status == READY
          $stdout.puts(lines)
          $stdout.flush # exit! skips it
          exit!(0)
        else
          warn(lines.empty? ? "narwhal: the master exited before it was ready" : lines)
          exit!(1)
        end
      end

      # What the launcher prints once the daemon serves.
      def self.notice(pid:, pid_file:, stderr_path:)
        [
          "master pid=#{pid} is running in the background",
          if stderr_path
            "its log (stderr) goes to #{stderr_path}"
          else
            "its log (stderr) is discarded (/dev/null): set stderr_path in the config file (-c) to keep it"
          end,
          pid_file ? "stop it with: kill -QUIT $(cat #{pid_file})" : "stop it with: kill -QUIT #{pid}"
        ]
      end

      def initialize(pipe)
        @pipe = pipe
      end

      def ready(pid_file: nil, stderr_path: nil)
        report(READY, *self.class.notice(pid: Process.pid, pid_file: pid_file, stderr_path: stderr_path))
      end

      def failed(message)
        report(FAILED, message.to_s)
      end

      # Workers must not hold the launcher's pipe open.
      def close_in_child
        @pipe&.close
        @pipe = nil
      end

      private

      def report(status, *lines)
        return unless @pipe

        @pipe.puts([status, *lines.map { |l| l.tr("\t\r\n", "   ") }].join(SEPARATOR))
        @pipe.close
        @pipe = nil
      rescue IOError, SystemCallError
        @pipe = nil
      end
    end
  end
end
