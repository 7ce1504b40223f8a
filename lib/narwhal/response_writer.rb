# frozen_string_literal: true

module Narwhal
  # Sends one Rack response on a connection. The head is built and
  # validated in C (ResponseHead); this class drives the body. One per
  # Responder: its head buffer is reused for every response.
  class ResponseWriter
    autoload :ErrorResponse, "narwhal/response_writer/error_response"
    autoload :OutputStream, "narwhal/response_writer/output_stream"

    KEEP = Next::KEEP
    CLOSE = Next::CLOSE
    RELEASE = Next::RELEASE
    HEAD_END = "\r\n\r\n"
    # Seconds the advertised idle timeout stays below keepalive_timeout: a
    # client starts counting when it has read the response, later than the
    # server does, and the field has whole seconds only.
    KEEP_ALIVE_MARGIN = 1

    # true once any byte of the current response went to the socket
    attr_reader :started

    # The `keep-alive: timeout=N` line of responses that keep their
    # connection (N: keepalive_timeout less KEEP_ALIVE_MARGIN, whole
    # seconds), so that clients stop reusing an idle connection before the
    # server closes it. nil (no line) when N would be under 1.
    def self.keep_alive_line(keepalive_timeout)
      seconds = keepalive_timeout.floor - KEEP_ALIVE_MARGIN
      "keep-alive: timeout=#{seconds}\r\n".freeze if seconds >= 1
    end

    # keep_alive_line: see ::keep_alive_line; load_report: a LoadReport
    # whose line goes into the app's responses (orca_load_report), or nil.
    def initialize(logger, keep_alive_line = nil, load_report = nil)
      @logger = logger
      @head = ResponseHead.new(keep_alive_line, load_report)
      @buf = String.new(capacity: 4096, encoding: Encoding::BINARY)
      @started = false
    end

    # 103 Early Hints (rack.early_hints), on the connection's SocketWriter.
    # Rare enough to build its own head.
    def self.early_hints(out, headers)
      buf = String.new(encoding: Encoding::BINARY)
      ResponseHead.new.write(buf, 103, headers, nil, ResponseHead::REQ_HTTP11 | ResponseHead::REQ_KEEPALIVE)
      out.write(buf)
    end

    # Writes the response to out (the connection's SocketWriter); returns
    # what becomes of the connection (Next): KEEP or CLOSE as the head said,
    # RELEASE when the app took the socket.
    def write(out, status, headers, body, flags)
      @started = false
      headers = to_hash(headers) unless headers.is_a?(Hash)
      path = nil
      if body.instance_of?(Array) # the usual body: spare the respond_to? lookup
        hint = body
      elsif body.respond_to?(:to_ary)
        hint = body.to_ary
      elsif (path = file_path(body))
        hint = File.size(path)
      end
      mode = @head.write(@buf, status, headers, hint, flags)
      @started = true
      out.write(@buf)
      case mode
      when ResponseHead::DONE then return @head.keepalive? ? KEEP : CLOSE
      when ResponseHead::HIJACK
        out.flush # the app writes to the socket itself: the head goes first
        @head.hijack.call(out.io)
        return RELEASE
      end
      write_body(out, body, mode, hint, path) && @head.keepalive? ? KEEP : CLOSE
    end

    # The size of the last response's head (its buffer may hold a small
    # body after it): what the access log subtracts to count body bytes.
    def head_bytesize
      @buf.index(HEAD_END) + HEAD_END.bytesize
    end

    private

    def write_body(out, body, mode, hint, path)
      stream = OutputStream.new(out, mode, @head.content_length, @logger)
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

    # A readable regular file behind a to_path body, or nil.
    def file_path(body)
      return unless body.respond_to?(:to_path)

      path = body.to_path
      path if path && File.file?(path)
    end

    def to_hash(headers)
      hash = {}
      headers.each { |k, v| hash[k] = v }
      hash
    end
  end
end
