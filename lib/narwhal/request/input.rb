# frozen_string_literal: true

require "stringio"
require "tmpdir"

module Narwhal
  class Request
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

    # One request body as it arrives: takes it out of its framing
    # (Content-Length or chunked), keeps it in memory up to the configured
    # buffer size, then in an unlinked temporary file, and turns into
    # rack.input once complete.
    class Input
      CONTENT_LENGTH = "CONTENT_LENGTH"
      HTTP_TRANSFER_ENCODING = "HTTP_TRANSFER_ENCODING"

      # The body could not be stored: its temporary file could not be opened
      # or written. The message says where, how far it got and why.
      class StorageError < StandardError
        # Out of room (disk, quota, file size limit): 507 Insufficient
        # Storage. Any other failure is a fault of the server's set-up: 500.
        NO_ROOM = [Errno::ENOSPC, Errno::EDQUOT, Errno::EFBIG].freeze

        attr_reader :status

        # doing: "opening" or "writing"; stored: bytes in the file by then
        def initialize(doing, dir, error, stored = nil)
          @status = NO_ROOM.include?(error.class) ? 507 : 500
          reason = SystemCallError.new(nil, error.errno).message # without Ruby's " @ io_write - path"
          super("#{doing} a temporary file in #{dir} failed#{" after #{stored} bytes" if stored}: " \
                "#{reason} (#{error.class.name.delete_prefix('Errno::')})")
        end
      end

      # length: the request's Content-Length; nil for a chunked body
      def initialize(memory_limit, length = nil)
        @memory_limit = memory_limit
        @remaining = length
        @complete = false
        @data = String.new(encoding: Encoding::BINARY)
        @file = nil
        @spilled = 0
      end

      def complete?
        @complete
      end

      # Takes the body bytes in buf from off on (chunked ones decoded by the
      # request's parser); returns the offset after those it took.
      def take(parser, env, buf, off)
        return take_chunked(parser, env, buf, off) unless @remaining

        n = buf.bytesize - off
        n = @remaining if n > @remaining
        if n.positive?
          @data << (off.zero? && n == buf.bytesize ? buf : buf.byteslice(off, n))
          store
          @remaining -= n
        end
        @complete = @remaining.zero?
        off + n
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

      def take_chunked(parser, env, buf, off)
        off = parser.decode_chunked(env, buf, off, @data)
        store
        if parser.body_done?
          @complete = true
          # Whole before the app runs, so shown as if sent with Content-Length
          # (RFC 9112 7.1.3): code that reads exactly CONTENT_LENGTH bytes
          # (Rails 6.1's raw_post) gets all of it.
          env[CONTENT_LENGTH] = bytesize.to_s
          env.delete(HTTP_TRANSFER_ENCODING)
        end
        off
      end

      def store
        spill if @file || @data.bytesize > @memory_limit
      end

      def spill
        @file ||= open_tempfile
        begin
          @spilled += @file.write(@data)
        rescue SystemCallError => e
          # the file's size, not @spilled: a write may have stored part of @data
          raise StorageError.new("writing", @dir, e, @file.size)
        end
        @data.clear
      end

      # Binary, as rack.input must read ASCII-8BIT strings.
      def open_tempfile
        @dir = Dir.tmpdir
        System::UnlinkedTempfile.open(@dir, "narwhal-body")
      rescue SystemCallError => e
        raise StorageError.new("opening", @dir, e)
      end
    end
  end
end
