# frozen_string_literal: true

module Narwhal
  module System
    # USR1: after logrotate moved the log files away, reopen every file this
    # process has open for appending at its path, so that logging continues in
    # fresh files. Same rule as Unicorn: only append-mode Files are touched.
    # At start-up the same code points stderr and stdout at their files.
    module LogReopener
      APPEND = File::APPEND | File::WRONLY

      # Returns how many files were reopened. std: { $stderr => path, ... }
      # for standard streams redirected to files (stderr_path, stdout_path),
      # which are IOs, not Files.
      def self.reopen(std = {})
        count = reopen_std(std)
        ObjectSpace.each_object(File) do |file|
          next unless reopenable?(file)

          reopen_file(file)
          count += 1
        rescue IOError, SystemCallError => e
          warn "narwhal: cannot reopen a log file: #{e.message}"
        end
        count
      end

      # USR1 in the master or a serving process: everything reopened, one
      # log line. who: the process named at the line's start ("master").
      def self.reopen_logs(config, logger, who: nil)
        count = reopen(std_paths(config))
        logger.info([who, "reopened #{count} log file(s)"].compact.join(" "))
      end

      # At start-up: stderr and stdout go to stderr_path and stdout_path.
      def self.redirect_std(config)
        reopen_std(std_paths(config))
      end

      def self.std_paths(config)
        { $stderr => config[:stderr_path], $stdout => config[:stdout_path] }
      end

      def self.reopen_std(std)
        std.count do |io, path|
          next false unless path

          io.reopen(path, "a")
          io.sync = true
        end
      end

      # Gives the log files to the user a worker switches to.
      def self.chown_all(uid, gid, paths = [])
        paths.compact.each { |path| File.chown(uid, gid, path) }
        ObjectSpace.each_object(File) do |file|
          file.chown(uid, gid) if reopenable?(file)
        rescue IOError, SystemCallError
          nil
        end
      end

      def self.reopenable?(file)
        return false if file.equal?($stderr) || file.equal?($stdout)

        !file.closed? && file.path && (file.fcntl(Fcntl::F_GETFL) & APPEND) == APPEND
      rescue IOError, SystemCallError
        false # unnamed (O_TMPFILE) or gone
      end

      def self.reopen_file(file)
        sync = file.sync
        file.reopen(file.path, "a")
        file.sync = sync
      end
    end
  end
end
