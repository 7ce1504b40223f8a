# frozen_string_literal: true

require "etc"

module Narwhal
  # `access_log PATH, format: :combined | :json`: one line per request,
  # written by the worker that served it.
  #
  # Lines are never split between processes or threads: each is built in
  # its thread's own buffer (AccessLog::Format), then gathered with others
  # (AccessLog::Buffer) and written, whole lines only, in one write(2) on a
  # file opened O_APPEND, which the kernel appends whole.
  #
  # The file is a File in append mode: USR1 reopens it with the other logs
  # (System::LogReopener), on the reactor's thread while app threads keep writing
  # (reopen dup2s the new file over the same descriptor).
  class AccessLog
    autoload :Format, "narwhal/access_log/format"
    autoload :Combined, "narwhal/access_log/combined"
    autoload :Json, "narwhal/access_log/json"
    autoload :Buffer, "narwhal/access_log/buffer"

    FORMATS = { combined: :Combined, json: :Json }.freeze
    DEFAULT_FORMAT = :combined
    # Failing writes (disk full) are logged at most this often (seconds).
    FAILURE_LOG_INTERVAL = 60

    attr_reader :path, :format

    # Opens path for appending (created 0644 if missing); raises BootError
    # with the reason when it cannot.
    def self.open(path, format, logger)
      file = File.open(path, File::WRONLY | File::APPEND | File::CREAT, 0o644)
      file.sync = true
      new(file, format, logger)
    rescue SystemCallError => e
      raise BootError, "cannot open access_log #{path}: #{ErrorMessage.strerror(e)}"
    end

    # Why path cannot be an access log, or nil. Writability is checked
    # only when not root: a root master's workers usually switch user.
    def self.path_problem(path)
      dir = File.dirname(path)
      return "is a directory" if File.directory?(path)
      return "its directory #{dir} does not exist" unless File.directory?(dir)
      return if Process.euid.zero?

      if File.exist?(path)
        "is not writable by #{Etc.getpwuid.name}" unless File.writable?(path)
      elsif !File.writable?(dir)
        "cannot be created: #{dir} is not writable by #{Etc.getpwuid.name}"
      end
    end

    def initialize(file, format, logger)
      @file = file
      @path = file.path
      @format = format
      @logger = logger
      @failures = 0
      @failure_logged_at = nil
      bound = file.stat.file? ? Buffer::FILE_BOUND : Buffer::PIPE_BUF
      @buffer = Buffer.new(method(:write_out), bound)
    end

    # A Format for one thread: each thread that logs gets its own buffer.
    def line_writer
      self.class.const_get(FORMATS.fetch(@format)).new(self)
    end

    # A request the server refused while reading it (Connection): rare, and
    # on whichever thread read it (an app thread parses a pipelined
    # request), so its line gets a buffer of its own.
    def refused(env, status, bytes)
      line_writer.record(env, status, nil, bytes, nil, nil)
    end

    # One complete line (Format#record): gathered, written at the next sweep.
    def write(line)
      @buffer << line
    end

    # What waits is written now: before USR1 reopens the file, at exit.
    def flush
      @buffer.flush
    end

    # From a signal handler, just before exit!.
    def flush_at_exit
      @buffer.flush_at_exit
    end

    # Whole lines, in one write(2). A short write (disk nearly full) gets
    # its rest written at once, so that at worst a line is interleaved,
    # never cut. A failure is logged, never raised into a response.
    def write_out(bytes)
      n = @file.syswrite(bytes)
      @file.syswrite(bytes.byteslice(n, bytes.bytesize - n)) if n < bytes.bytesize
    rescue IOError, SystemCallError => e
      failed(e)
    end

    # A line could not be written or built: counted, logged now and then.
    def failed(error)
      @failures += 1
      now = Clock.now
      return if @failure_logged_at && now - @failure_logged_at < FAILURE_LOG_INTERVAL

      @logger.error("access_log #{@path}: #{error.class}: #{error.message} " \
                    "(#{@failures} line(s) lost since the last report)")
      @failure_logged_at = now
      @failures = 0
    end

    def close
      flush
      @file.close
    end
  end
end
