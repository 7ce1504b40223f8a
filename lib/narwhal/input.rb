# frozen_string_literal: true

require "securerandom"
require "stringio"
require "tmpdir"

module Narwhal
  # rack.input for requests without a body: stateless, so one instance is
  # shared by every request.
  class NullInput
    def read(length = nil, buffer = nil)
      buffer&.clear
      return nil if length&.positive?

      buffer || String.new(encoding: Encoding::BINARY)
    end

    def gets(*) = nil
    def each; end
    def rewind = 0
    def close; end
    def size = 0
    def binmode = self
    def binmode? = true
    def external_encoding = Encoding::BINARY

    INSTANCE = new.freeze
  end

  # Collects a request body as it arrives: in memory up to the configured
  # buffer size, then in an unlinked temporary file. Turns into rack.input.
  class Input
    def initialize(memory_limit)
      @memory_limit = memory_limit
      @data = String.new(encoding: Encoding::BINARY)
      @file = nil
      @spilled = 0
    end

    # The String the chunked decoder appends to; call #commit afterwards.
    def sink
      @data
    end

    def <<(chunk)
      @data << chunk
      commit
    end

    def commit
      spill if @file || @data.bytesize > @memory_limit
      self
    end

    def bytesize
      @spilled + @data.bytesize
    end

    # The rewindable IO handed to the app.
    def to_io
      return StringIO.new(@data) unless @file

      @file.flush
      @file.rewind
      @file
    end

    def close
      @file&.close
    rescue IOError
      nil
    end

    private

    def spill
      @file ||= open_tempfile
      @spilled += @file.write(@data)
      @data.clear
    end

    # Binary mode in both cases: rack.input must read ASCII-8BIT strings.
    def open_tempfile
      file = begin
        File.open(Dir.tmpdir, File::RDWR | File::TMPFILE, 0o600)
      rescue Errno::EOPNOTSUPP, Errno::EISDIR, Errno::EINVAL, NameError
        named_tempfile
      end
      file.binmode
    end

    # Without O_TMPFILE (macOS, some file systems): a fresh name, unlinked at once.
    def named_tempfile
      path = File.join(Dir.tmpdir, "narwhal-body-#{Process.pid}-#{SecureRandom.hex(8)}")
      file = File.open(path, File::RDWR | File::CREAT | File::EXCL, 0o600)
      File.unlink(path)
      file
    end
  end
end
