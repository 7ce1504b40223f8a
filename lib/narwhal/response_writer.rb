# frozen_string_literal: true

module Narwhal
  # Sends one Rack response on a connection. The head is built and
  # validated in C (ResponseHead); this class drives the body.
  class ResponseWriter
    HIJACKED = :hijacked

    # true once any byte of the current response went to the socket
    attr_reader :started

    def initialize(io, logger)
      @io = io
      @logger = logger
      @head = ResponseHead.new
      @buf = String.new(capacity: 4096, encoding: Encoding::BINARY)
      @started = false
    end

    # Writes the response; returns true to keep the connection, false to
    # close it, or HIJACKED when the app took the socket.
    def write(status, headers, body, flags)
      @started = false
      headers = to_hash(headers) unless headers.is_a?(Hash)
      hint, path = body_hint(body)
      mode = @head.write(@buf, status, headers, hint, flags)
      @started = true
      @io.write(@buf)
      case mode
      when ResponseHead::DONE then return @head.keepalive?
      when ResponseHead::HIJACK
        @head.hijack.call(@io)
        return HIJACKED
      end
      write_body(body, mode, hint, path) && @head.keepalive?
    end

    # 103 Early Hints (rack.early_hints)
    def early_hints(headers)
      @head.write(@buf, 103, headers, nil, ResponseHead::REQ_HTTP11 | ResponseHead::REQ_KEEPALIVE)
      @io.write(@buf)
    end

    private

    def write_body(body, mode, hint, path)
      stream = OutputStream.new(@io, mode, @head.content_length, @logger)
      if path && mode == ResponseHead::LENGTH && hint == @head.content_length
        stream.copy_file(path)
      elsif hint.is_a?(Array)
        hint.each { |part| stream.write(part) }
      elsif body.respond_to?(:each)
        body.each { |part| stream.write(part) }
      else
        body.call(stream)
      end
      stream.finish
    end

    def body_hint(body)
      return [body.to_ary, nil] if body.respond_to?(:to_ary)

      if body.respond_to?(:to_path) && (path = body.to_path) && (size = File.size?(path))
        return [size, path]
      end
      [nil, nil]
    end

    def to_hash(headers)
      hash = {}
      headers.each { |k, v| hash[k] = v }
      hash
    end
  end
end
