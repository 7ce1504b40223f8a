# frozen_string_literal: true

module Narwhal
  class ResponseWriter
    # Writes a response body to the socket with the framing the head chose
    # (fixed length, chunked, or raw). It is also the `stream` given to Rack 3
    # streaming bodies.
    class OutputStream
      CRLF = "\r\n"
      LAST_CHUNK = "0\r\n\r\n"
      # Chunks up to this size go out with their framing in one write.
      COALESCE_MAX = 16 * 1024

      # false when the bytes sent did not match the declared framing
      attr_reader :intact

      # out: a SocketWriter
      def initialize(out, mode, length, logger)
        @out = out
        @mode = mode
        @remaining = length
        @logger = logger
        @intact = true
        @finished = false
        @chunk = nil
      end

      def write(data)
        data = data.to_s
        return 0 if data.empty? || @finished

        case @mode
        when ResponseHead::CHUNKED then write_chunk(data)
        when ResponseHead::LENGTH then write_counted(data)
        else @out.write(data)
        end
        data.bytesize
      end

      def <<(data)
        write(data)
        self
      end

      # Sends a file (with sendfile(2) where the kernel allows it).
      def copy_file(path)
        # opened outside the writer: a missing file is not the client's doing
        sent = File.open(path, "rb") { |file| @out.write_file(file, @remaining) }
        @remaining -= sent
      end

      def flush = self
      def read(*args) = @out.io.read(*args)
      def close_read; end

      def close
        finish
      end
      alias close_write close

      def closed?
        @finished
      end

      # Ends the body; returns whether the connection may be reused.
      def finish
        return @intact if @finished

        @finished = true
        @out.write(LAST_CHUNK) if @mode == ResponseHead::CHUNKED
        if @mode == ResponseHead::LENGTH && @remaining.positive?
          @logger.error("response body shorter than content-length by #{@remaining} bytes; closing connection")
          @intact = false
        end
        @intact &&= @mode != ResponseHead::CLOSE
      end

      private

      def write_chunk(data)
        size = data.bytesize.to_s(16)
        if data.bytesize > COALESCE_MAX
          @out.write(size << CRLF)
          @out.write(data)
          @out.write(CRLF)
        else
          chunk = (@chunk ||= String.new(capacity: 256, encoding: Encoding::BINARY))
          chunk.clear.force_encoding(Encoding::BINARY) # data may have left its encoding
          @out.write(chunk << size << CRLF << data << CRLF)
        end
      end

      def write_counted(data)
        if data.bytesize > @remaining
          unless @remaining.negative?
            @logger.error("response body longer than content-length; extra bytes dropped, closing connection")
            @out.write(data.byteslice(0, @remaining)) if @remaining.positive?
          end
          @remaining = -1
          @intact = false
          return
        end
        @out.write(data)
        @remaining -= data.bytesize
      end
    end
  end
end
