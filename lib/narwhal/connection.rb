# frozen_string_literal: true

require "socket"

module Narwhal
  # One client connection: reads and parses requests as bytes arrive, calls
  # the app once a request is complete, writes the response, and keeps the
  # connection for the next request when HTTP allows.
  #
  # It never blocks on reading: the reactor calls #on_readable when bytes
  # are waiting, so a slow client holds no app thread.
  class Connection
    READ_SIZE = 16 * 1024
    # After an error response we read and drop what the client still sends,
    # so that closing does not reset the connection before it reads our answer.
    LINGER_SECONDS = 2
    LINGER_MAX_BYTES = 1024 * 1024

    IDLE = 0 # waiting for the first byte of a request
    HEAD = 1 # reading the request line and header section
    BODY = 2 # reading the request body
    LINGER = 3 # error sent, draining before close

    CONTINUE = "HTTP/1.1 100 Continue\r\n\r\n"
    REQUEST_METHOD = "REQUEST_METHOD"
    PATH_INFO = "PATH_INFO"
    HEAD_METHOD = "HEAD"
    RACK_INPUT = "rack.input"
    RACK_HIJACK_IO = "rack.hijack_io"
    RESPONSE_FINISHED = "rack.response_finished"
    AFTER_REPLY = "rack.after_reply"
    EARLY_HINTS = "rack.early_hints"
    REQ_HTTP11 = ResponseHead::REQ_HTTP11
    REQ_KEEPALIVE = ResponseHead::REQ_KEEPALIVE
    REQ_HEAD = ResponseHead::REQ_HEAD

    attr_reader :io, :deadline
    attr_accessor :monitor

    def initialize(io, listener, server)
      @io = io
      @server = server
      @app = server.app
      @logger = server.logger
      limits = server.limits
      @body_buffer_size = limits.body_buffer_size
      @keepalive_timeout = limits.keepalive_timeout
      @keepalive_requests = limits.keepalive_requests
      @client_timeout = limits.client_timeout
      @scoreboard = server.scoreboard
      @slot = server.slot
      @parser = HttpParser.new
      @parser.configure(limits.max_request_line, limits.max_header_size,
                        limits.max_header_fields, limits.max_body_size)
      @buf = String.new(capacity: READ_SIZE, encoding: Encoding::BINARY)
      @rbuf = String.new(capacity: READ_SIZE, encoding: Encoding::BINARY)
      @off = 0
      @out = SocketWriter.new(io, limits.write_timeout)
      @writer = ResponseWriter.new(@out, @logger)
      @finished_callbacks = []
      @after_reply = []
      @template = connection_env(server.env_template(listener), listener.remote_addr(io), server.early_hints?)
      @state = IDLE
      @requests = 0
      @env = nil
      @input = nil
      @hijacked = false
      @closed = false
      @deadline = Clock.now + @client_timeout
    end

    def closed?
      @closed
    end

    # Between requests on a kept-alive connection, with nothing buffered: a
    # graceful stop may close it. A new connection is not idle: its first
    # request is on its way.
    def idle?
      @state == IDLE && @requests.positive? && @off >= @buf.bytesize
    end

    # Reads what the socket has and serves every complete request in it.
    # Returns false once the connection is closed or taken over by the app.
    def on_readable
      # `while true`, not `loop do`: a block here would cost allocations on
      # every request (this is the hot path)
      while true # rubocop:disable Style/InfiniteLoop
        into = @off >= @buf.bytesize ? @buf : @rbuf
        data = @io.read_nonblock(READ_SIZE, into, exception: false)
        return true if data == :wait_readable
        return close if data.nil?

        n = data.bytesize
        if @state == LINGER
          return close if (@lingered += n) > LINGER_MAX_BYTES

          next
        end
        if into.equal?(@buf)
          @off = 0
        else
          @buf << @rbuf
        end
        return false unless process
        return true if n < READ_SIZE
      end
    rescue IOError, SystemCallError
      close
    end

    # Called by the reactor once @deadline has passed.
    def on_timeout
      if @state == HEAD || @state == BODY
        reject(408)
        close
      else
        close
      end
    end

    def close
      return false if @closed

      @closed = true
      @monitor&.close
      @input&.close
      @io.close unless @hijacked || @io.closed?
      false
    rescue IOError, SystemCallError
      false
    end

    # rack.hijack (full hijack): the app takes the socket.
    def hijack
      @hijacked = true
      @env[RACK_HIJACK_IO] = @io if @env
      @io
    end

    # rack.early_hints
    def early_hints(headers)
      @writer.early_hints(headers) if @parser.http11?
      nil
    end

    private


    def connection_env(template, remote_addr, early_hints)
      env = template.merge("REMOTE_ADDR" => remote_addr, "rack.hijack" => method(:hijack),
                           RESPONSE_FINISHED => @finished_callbacks, AFTER_REPLY => @after_reply)
      env[EARLY_HINTS] = method(:early_hints) if early_hints
      env
    end

    # Parses what is buffered; serves each complete request. Returns false
    # once the connection is closed or hijacked.
    def process
      while true # rubocop:disable Style/InfiniteLoop
        if @state == IDLE
          @state = HEAD
          @env = @template.dup
          @idle_deadline = @deadline
          @deadline = Clock.now + @client_timeout
        end
        if @state == HEAD
          @off = @parser.execute(@env, @buf, @off)
          unless @parser.head_done?
            # only empty lines so far (allowed before a request line, sent by
            # some clients after a body): the connection is still idle
            if @off >= @buf.bytesize && !@env.key?(REQUEST_METHOD)
              @state = IDLE
              @deadline = @idle_deadline
            end
            return true
          end

          start_body
        end
        return true if @state == BODY && !read_body

        discard_consumed
        return false unless serve
        return true if @off >= @buf.bytesize
      end
    rescue HttpParserError => e
      reject(e.status)
    rescue Input::StorageError => e
      refuse_body(e)
    end

    def start_body
      length = @parser.content_length
      if @parser.chunked? || (length && length.positive?)
        @state = BODY
        @input = Input.new(@body_buffer_size, @parser.chunked? ? nil : length)
        @out.write(CONTINUE) if @parser.expect_continue? && @parser.http11? && @off >= @buf.bytesize
      else
        @state = IDLE
      end
    end

    # Moves buffered body bytes into @input; true when the body is complete.
    def read_body
      @off = @input.take(@parser, @env, @buf, @off)
      if @input.complete?
        @state = IDLE
        return true
      end
      # a read ending inside a chunk-size line leaves it unconsumed; drop
      # the decoded bytes before it, or @buf would grow with the body
      discard_consumed
      false
    end

    # Drops consumed bytes so that the next request starts at offset 0.
    def discard_consumed
      return if @off.zero?

      if @off >= @buf.bytesize
        @off = @buf.bytesize
      else
        @buf[0, @off] = "" # in place (@buf is binary: indices are bytes)
        @off = 0
      end
    end

    def serve
      env = @env
      env[RACK_INPUT] = @input.to_io if @input
      @requests += 1
      keepalive = @parser.keepalive? && @requests < @keepalive_requests && @server.running?
      flags = (@parser.http11? ? REQ_HTTP11 : 0) | (keepalive ? REQ_KEEPALIVE : 0)
      flags |= REQ_HEAD if env[REQUEST_METHOD] == HEAD_METHOD
      @scoreboard.request_started(@slot) # the master's `timeout` clock
      begin
        keep = respond(env, flags)
        finish_request(env)
      ensure
        @scoreboard.request_finished(@slot)
      end
      return detach if keep == ResponseWriter::HIJACKED || @hijacked
      return close unless keep

      @deadline = Clock.now + @keepalive_timeout
      true
    end

    # Calls the app and writes its response; returns what ResponseWriter
    # returns (false on any failure).
    def respond(env, flags)
      status, headers, body = @app.call(env)
      return ResponseWriter::HIJACKED if @hijacked

      @status = status
      @headers = headers
      @writer.write(status, headers, body, flags)
    rescue WriteTimeout => e
      @logger.warn("write timeout: #{e.message}, closing (#{env[REQUEST_METHOD]} #{env[PATH_INFO]})")
      @error = e
      false
    rescue ClientGone => e
      # only failed socket writes: the app's own I/O errors are app errors
      @logger.debug { "client went away: #{e.message}" }
      @error = e
      false
    rescue StandardError, ScriptError => e
      log_error(env, e)
      @error = e
      send_error(500) unless @writer.started || @hijacked
      false
    ensure
      close_body(body)
    end

    def close_body(body)
      body.close if body.respond_to?(:close)
    rescue StandardError => e
      @logger.error("body.close failed: #{e.class}: #{e.message}")
    end

    def finish_request(env)
      run_callbacks(env)
      @parser.reset
      @input&.close
      @input = nil
      @env = nil
      @status = @headers = @error = nil
      @state = IDLE
    end

    # rack.response_finished callables run in reverse order of registration
    # (Rack 3.1 SPEC) with the app's status and headers (nil when the app
    # raised) and the error that cut the response short, if any. The lists
    # are read from env (an app may have replaced ours); ours are shared by
    # every request on the connection, so they are emptied afterwards.
    def run_callbacks(env)
      finished = env[RESPONSE_FINISHED]
      finished = @finished_callbacks unless finished.is_a?(Array)
      finished.reverse_each { |cb| safely { cb.call(env, @status, @headers, @error) } }
      @finished_callbacks.clear
      after = env[AFTER_REPLY]
      after = @after_reply unless after.is_a?(Array)
      after.each { |cb| safely { cb.call } }
      @after_reply.clear
    end

    def safely
      yield
    rescue StandardError => e
      @logger.error("response callback failed: #{e.class}: #{e.message}")
    end

    def detach
      @closed = true
      @monitor&.close
      false
    end

    # Answers a request we will not serve, then drains and closes.
    def reject(status)
      send_error(status)
      @io.shutdown(Socket::SHUT_WR)
      @state = LINGER
      @lingered = 0
      @deadline = Clock.now + LINGER_SECONDS
      true
    rescue IOError, SystemCallError
      close
    end

    # No room for the body (or no temporary file): free what was stored,
    # log the cause once and answer like any request we cannot serve.
    def refuse_body(error)
      @input.close
      @input = nil
      @logger.error("request body of #{@env[REQUEST_METHOD]} #{@env[PATH_INFO]} not stored: #{error.message}; " \
                    "answered #{error.status}, closing")
      reject(error.status)
    end

    def send_error(status)
      @out.write(ErrorResponse.bytes(status, head: @env && @env[REQUEST_METHOD] == HEAD_METHOD))
    rescue IOError, SystemCallError
      nil
    end

    def log_error(env, error)
      @logger.error("app error: #{error.class}: #{error.message} " \
                    "(#{env[REQUEST_METHOD]} #{env[PATH_INFO]})#{ErrorMessage.backtrace(error)}")
    end
  end
end
