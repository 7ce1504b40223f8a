# frozen_string_literal: true

module Narwhal
  # `-D`: the launching process forks, the child starts a new session and
  # forks again (so it can never regain a terminal), and the launcher waits
  # on a pipe: it exits 0 once the master says it is ready, or 1 with the
  # master's error if boot fails.
  class Daemon
    READY = "ready"

    # Returns the Daemon in the master; never returns in the launcher.
    def self.daemonize
      # USR2's new master is detached already; forking again would look to the old master like its death
      return new(nil) if ENV.key?(Master::FD_ENV)

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
      $stdin.reopen(File::NULL)
      # stderr_path / stdout_path reopen these later when configured
      $stdout.reopen(File::NULL, "a")
      $stderr.reopen(File::NULL, "a")
      new(wr)
    end

    def self.launcher_wait(rd)
      line = rd.gets
      if line&.chomp == READY
        exit!(0)
      else
        warn(line ? "narwhal: #{line.chomp}" : "narwhal: the master exited before it was ready")
        exit!(1)
      end
    end

    def initialize(pipe)
      @pipe = pipe
    end

    def ready
      report(READY)
    end

    def failed(message)
      report(message.to_s.tr("\n", " "))
    end

    # Workers must not hold the launcher's pipe open.
    def close_in_child
      @pipe&.close
      @pipe = nil
    end

    private

    def report(line)
      return unless @pipe

      @pipe.puts(line)
      @pipe.close
      @pipe = nil
    rescue IOError, SystemCallError
      @pipe = nil
    end
  end
end
