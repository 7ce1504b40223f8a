# frozen_string_literal: true

require "rbconfig"

module Narwhal
  class Master
    # USR2 in the master: fork a child that execs the original command line
    # (START_CTX) with the listeners passed down in NARWHAL_FD, moving the
    # pid file aside to PATH.oldbin; and, if that child dies, take the pid
    # file back. The new master is the exec'd child itself (a re-exec'd `-D`
    # does not daemonize again), so its death is seen here.
    #
    # Under rackup and rails server it is not available: they consume their
    # command lines, so the new master could not start; USR2 is refused
    # with a log line and the master carries on.
    class Reexec
      REFUSED = "USR2: re-exec is not available under rackup or rails server " \
                "(run `narwhal -c FILE` for upgrades without downtime); carrying on"

      attr_reader :pid
      attr_writer :logger

      # forker: the master's (Forker): a fork the kernel refuses fails.
      def initialize(logger, available: true, forker: Forker.new)
        @logger = logger
        @available = available
        @forker = forker
        @pid = nil
      end

      def running?
        !@pid.nil?
      end

      # listeners: the Listener::Set the new master inherits, with control's
      # socket (Control, or nil) and the upgrade's channel (Upgrade::Channel,
      # or nil); before_exec runs in the child just before exec. Returns
      # the pid file the old master keeps (renamed PATH.oldbin), or the one
      # given when the re-exec is refused.
      def start(pid_file, listeners, control: nil, channel: nil, &before_exec)
        unless @available
          @logger.error(REFUSED)
          return pid_file
        end
        if @pid
          @logger.error("USR2 ignored: re-exec already running as pid=#{@pid}")
          return pid_file
        end
        if pid_file
          if File.exist?("#{pid_file.path}.oldbin")
            @logger.error("USR2 ignored: #{pid_file.path}.oldbin exists (another upgrade in progress)")
            return pid_file
          end
          pid_file = pid_file.rename_to_oldbin
        end
        begin
          @pid = @forker.fork { exec_new_master([listeners, control, channel].compact, before_exec) }
          channel&.forked
        rescue ForkRefused, SystemCallError => e
          @logger.error("USR2: fork failed: #{ErrorMessage.for(e)}; old master carries on")
          return pid_file && original_name(pid_file)
        end
        Process.setproctitle("narwhal master (old)")
        @logger.info("re-executing: new master pid=#{@pid}")
        pid_file
      end

      # The new master died: returns the pid file under its own name again.
      def failed(status, pid_file)
        @logger.error("re-exec pid=#{@pid} died (#{ErrorMessage.exit_status(status)}); old master carries on")
        @pid = nil
        Process.setproctitle("narwhal master")
        pid_file && original_name(pid_file)
      end

      private

      # PATH.oldbin back to PATH.
      def original_name(pid_file)
        path = pid_file.path.delete_suffix(".oldbin")
        File.rename(pid_file.path, path) if File.exist?(pid_file.path) && !File.exist?(path)
        PidFile.new(path)
      end

      # passed_on: what the new master inherits (each #pass_on_exec).
      def exec_new_master(passed_on, before_exec)
        inherited = passed_on.map(&:pass_on_exec).reduce({}, :merge)
        before_exec.call
        Dir.chdir(START_CTX[:cwd])
        # the new master's START_CTX keeps a symlinked path (/app/current)
        ENV["PWD"] = START_CTX[:cwd]
        cmd = [START_CTX[0]].concat(START_CTX[:argv])
        cmd.unshift(RbConfig.ruby) unless File.executable?(cmd.first)
        exec(*cmd, inherited)
      rescue Exception => e # rubocop:disable Lint/RescueException
        @logger.error("re-exec failed: #{ErrorMessage.for(e)}")
        exit!(1)
      end
    end
  end
end
