# frozen_string_literal: true

module Narwhal
  # Writes a response body to the socket with the framing the head chose
  # (fixed length, chunked, or raw). It is also the `stream` given to Rack 3
  # streaming bodies.
  class OutputStream
    CRLF = "\r\n"
    LAST_CHUNK = "0\r\n\r\n"

    # false when the bytes sent did not match the declared framing
    attr_reader :intact

    def initialize(io, mode, length, logger)
      @io = io
      @mode = mode
      @remaining = length
      @logger = logger
      @intact = true
      @finished = false
    end

    def write(data)
      data = data.to_s
      return 0 if data.empty? || @finished

      case @mode
      when ResponseHead::CHUNKED then @io.write(data.bytesize.to_s(16), CRLF, data, CRLF)
      when ResponseHead::LENGTH then write_counted(data)
      else @io.write(data)
      end
      data.bytesize
    end

    def <<(data)
      write(data)
      self
    end

    # Sends a file with sendfile(2) where the kernel allows it.
    def copy_file(path)
      sent = IO.copy_stream(path, @io, @remaining)
      @remaining -= sent if @remaining
    end

    def flush = self
    def read(*args) = @io.read(*args)
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
      @io.write(LAST_CHUNK) if @mode == ResponseHead::CHUNKED
      if @mode == ResponseHead::LENGTH && @remaining.positive?
        @logger.error("response body shorter than content-length by #{@remaining} bytes; closing connection")
        @intact = false
      end
      @intact &&= @mode != ResponseHead::CLOSE
    end

    private

    def write_counted(data)
      if data.bytesize > @remaining
        unless @remaining.negative?
          @logger.error("response body longer than content-length; extra bytes dropped, closing connection")
          @io.write(data.byteslice(0, @remaining)) if @remaining.positive?
        end
        @remaining = -1
        @intact = false
        return
      end
      @io.write(data)
      @remaining -= data.bytesize
    end
  end
end
