# frozen_string_literal: true

module Narwhal
  # USR1: after logrotate moved the log files away, reopen every file this
  # process has open for appending at its path, so that logging continues in
  # fresh files. Same rule as Unicorn: only append-mode Files are touched.
  module LogReopener
    APPEND = File::APPEND | File::WRONLY

    # Returns how many files were reopened. std: { $stderr => path, ... }
    # for standard streams redirected to files (stderr_path, stdout_path),
    # which are IOs, not Files.
    def self.reopen(std = {})
      count = 0
      std.each do |io, path|
        next unless path

        io.reopen(path, "a")
        io.sync = true
        count += 1
      end
      ObjectSpace.each_object(File) do |file|
        next unless reopenable?(file)

        reopen_file(file)
        count += 1
      rescue IOError, SystemCallError => e
        warn "narwhal: cannot reopen a log file: #{e.message}"
      end
      count
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
