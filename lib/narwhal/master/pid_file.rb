# frozen_string_literal: true

module Narwhal
  class Master
    # The master's pid file, with Unicorn's rules: refuse to start over a live
    # process's file, write atomically, and rename to PATH.oldbin during a
    # re-exec so that the new master can write PATH.
    class PidFile
      attr_reader :path

      def initialize(path)
        @path = path
      end

      # The pid in the file when that process is alive, else nil.
      def self.live_pid(path)
        pid = File.read(path).to_i
        return nil unless pid.positive?

        Process.kill(0, pid)
        pid
      rescue Errno::ENOENT, Errno::ESRCH, Errno::EISDIR
        nil
      rescue Errno::EPERM
        pid # alive, someone else's
      end

      def write(pid = Process.pid)
        other = self.class.live_pid(@path)
        raise ArgumentError, "pid file #{@path} names running process #{other}" if other && other != pid

        tmp = "#{@path}.#{pid}.tmp"
        File.write(tmp, "#{pid}\n")
        File.rename(tmp, @path)
      rescue Errno::ENOENT, Errno::EACCES, Errno::ENOTDIR => e
        dir = File.dirname(@path)
        reason = File.directory?(dir) ? ErrorMessage.strerror(e) : "directory #{dir} does not exist"
        raise ArgumentError, "cannot write pid file #{@path}: #{reason}"
      end

      # Moves the file aside (PATH.oldbin); returns the new PidFile.
      def rename_to_oldbin
        old = self.class.new("#{@path}.oldbin")
        File.rename(@path, old.path) if File.exist?(@path)
        old
      end

      # Deletes the file only if it still names this process.
      def unlink(pid = Process.pid)
        File.unlink(@path) if File.read(@path).to_i == pid
      rescue SystemCallError
        nil
      end
    end
  end
end
