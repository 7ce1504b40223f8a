# frozen_string_literal: true

module Narwhal
  # Runs the app for one complete request and writes its response: marks
  # the scoreboard (the master's `timeout` clock), calls the app, writes the
  # response, closes the body, runs rack.response_finished and
  # rack.after_reply, and says what becomes of the connection (Next): KEEP
  # it for the next request, CLOSE it, or RELEASE it (the app took the socket).
  #
  # One per thread that runs the app (one per worker today). It keeps the
  # current response's status, headers and error in instance variables,
  # not in an array per request, and forgets them once it is done.
  #
  # With soft_timeout on, Responder::Watched runs each request under the
  # thread's SoftTimeout::Watch: its steps (#run_app, #write, #close_app_body)
  # are the ones a RequestTimeout may interrupt.
  #
  # Queue time (QueueTime: the proxy's X-Request-Start, or the kernel's
  # arrival stamp) goes into env just before the app runs; with access_log
  # on, the request's line is written once its response is handed to the
  # connection.
  class Responder
    autoload :QueueTime, "narwhal/responder/queue_time"
    autoload :Shedder, "narwhal/responder/shedder"
    autoload :SoftTimeout, "narwhal/responder/soft_timeout"
    autoload :Watched, "narwhal/responder/watched"

    # What a failed request may have raised: the app's errors (Watched
    # adds RequestTimeout).
    FAILURES = [StandardError, ScriptError].freeze

    KEEP = Next::KEEP
    CLOSE = Next::CLOSE
    RELEASE = Next::RELEASE

    REQUEST_METHOD = Request::REQUEST_METHOD
    PATH_INFO = Request::PATH_INFO

    # slot: the calling thread's scoreboard slot; counters: the worker's.
    # access_log: this thread's AccessLog::Format, nil when the log is off.
    # keep_alive: ResponseWriter.keep_alive_line; load_report: the
    # process's LoadReport (orca_load_report), nil when off; both go into
    # every head, the C loop's and the writer's. trust_queue_header:
    # trust_x_request_start (QueueTime); queue_deadline (seconds, nil: off)
    # and retry_after: the Shedder's.
    def initialize(app, logger, slot, counters, access_log: nil, keep_alive: nil, load_report: nil,
                   trust_queue_header: true, queue_deadline: nil, retry_after: 1)
      @app = app
      @queue_time = QueueTime.new(slot, trust_header: trust_queue_header)
      @shedder = Shedder.new(logger, counters, deadline: queue_deadline, retry_after: retry_after) if queue_deadline
      @access_log = access_log
      @logger = logger
      @slot = slot
      @counters = counters
      @writer = ResponseWriter.new(logger, keep_alive, load_report)
      # the access log times and counts each response in Ruby
      @request_loop = RequestLoop.new(app, self, slot, ResponseHead.new(keep_alive, load_report)) unless access_log
    end

    # The C loop (RequestLoop) that reads and serves the common requests of
    # a connection, calling back here for the rest; nil: every request
    # goes through #respond.
    attr_reader :request_loop

    def respond(request)
      env = request.env
      queue_time = @queue_time.measure(request, env)
      return shed(request, queue_time) if @shedder&.late?(queue_time)

      # the master names the request from these (timeout log line, status)
      @slot.request_started(request.request_method, env[PATH_INFO], request.out.fileno)
      started = Clock.now if @access_log
      begin
        outcome = call_app(request, env)
        log_request(request, env, started, queue_time) if @access_log
        run_callbacks(request, env)
      ensure
        finish
      end
      outcome
    end

    # The rest of #respond for a request whose app the RequestLoop called:
    # result is what the app returned, or error what it raised. The
    # response is written, the body closed and the callbacks run as if
    # the app had been called here.
    def respond_returned(request, result, error)
      env = request.env
      begin
        outcome = error ? failed(request, env, error) : write_response(request, env, result)
        run_callbacks(request, env)
      ensure
        finish
      end
      outcome
    end

    # A request that waited `waited` seconds, past queue_deadline, is
    # answered 503 (Shedder) without the app; the RequestLoop sends here
    # those it finds. The outcome: CLOSE.
    def shed(request, waited)
      @answered = Shedder::STATUS
      outcome = @shedder.answer(request, waited)
      log_request(request, request.env, Clock.now, waited) if @access_log
      outcome
    ensure
      @answered = nil
    end

    # The RequestLoop sent part of a response that needs no more of the
    # app's code (an Array body, no callbacks): the rest goes out here,
    # spooled or waited for like any write. keepalive: what its head said.
    def send_rest(request, rest, keepalive)
      request.out.write(rest)
      keepalive ? KEEP : CLOSE
    rescue ClientGone => e
      failed(request, request.env, e)
    ensure
      finish
    end

    private

    # The request is over: its response is forgotten, the thread's
    # scoreboard slot idle again.
    def finish
      @status = @headers = @error = @returned = @answered = nil
      @slot.request_finished
    end

    # The status the client got: the server's error response (@answered)
    # or the app's; body bytes: what went to the connection after the head.
    # A hijacked response counts what narwhal wrote before the app took the
    # socket.
    def log_request(request, env, started, queue_time)
      bytes = if @answered then ResponseWriter::ErrorResponse.body_bytesize(@answered, head: request.head?)
              elsif @status && @writer.started then [request.out.sent - @mark - @writer.head_bytesize, 0].max
              else 0
              end
      @access_log.record(env, @answered || @returned || 0, @headers, bytes, Clock.now - started, queue_time)
    end

    # The outcome; CLOSE on any failure, which is kept in @error.
    def call_app(request, env)
      result = run_app(env)
    rescue *failures => e
      failed(request, env, e)
    else
      write_response(request, env, result)
    end

    def run_app(env)
      @app.call(env)
    end

    def failures
      FAILURES
    end

    # Writes what the app returned, then closes the body.
    def write_response(request, env, result)
      status, headers, body = result
      @returned = status
      @mark = request.out.sent if @access_log # early hints are not the response's bytes
      return RELEASE if request.hijacked?

      @status = status
      @headers = headers
      @slot.responding! # before its first byte: the master's timeout answer is no longer its
      written = write(request.out, status, headers, body, request.flags)
      return written unless written == CLOSE && request.hijacked?

      RELEASE
    rescue *failures => e
      failed(request, env, e)
    ensure
      close_body(request, env, body)
    end

    def write(out, status, headers, body, flags)
      @writer.write(out, status, headers, body, flags)
    end

    # What the app's code or the response's writes raised: answered or
    # logged by kind; the connection closes.
    def failed(request, env, error)
      @error = error
      case error
      when WriteTimeout
        @logger.warn("write timeout: #{error.message}, closing (#{env[REQUEST_METHOD]} #{env[PATH_INFO]})")
      when ClientGone
        # only failed socket writes: the app's own I/O errors are app errors
        @logger.debug { "client went away: #{error.message}" }
      else app_error(request, env, error)
      end
      CLOSE
    end

    def app_error(request, env, error)
      @counters.count(Scoreboard::APP_ERRORS)
      @logger.error("app error: #{error.class}: #{error.message} " \
                    "(#{env[REQUEST_METHOD]} #{env[PATH_INFO]})#{ErrorMessage.backtrace(error)}")
      # @status is set once the app returned: only then can bytes have gone out
      return if (@status && @writer.started) || request.hijacked?

      @answered = 500
      @slot.responding!
      request.out.write(ResponseWriter::ErrorResponse.bytes(500, head: request.head?))
    rescue IOError, SystemCallError
      nil
    end

    def close_body(request, env, body)
      return unless body.respond_to?(:close) # (an Array may have one of its own: asked too)

      close_app_body(body)
    rescue StandardError => e
      @logger.error("body.close failed: #{e.class}: #{e.message}")
    end

    def close_app_body(body)
      body.close
    end

    # rack.response_finished callables run in reverse order of registration
    # (Rack 3.1 SPEC) with the app's status and headers (nil when the app
    # raised) and the error that cut the response short, if any. The lists
    # are read from env: an app may have replaced the connection's own.
    def run_callbacks(request, env)
      finished = env[Request::RESPONSE_FINISHED]
      finished = request.finished_callbacks unless finished.is_a?(Array)
      finished.reverse_each { |cb| safely { cb.call(env, @status, @headers, @error) } } unless finished.empty?
      after = env[Request::AFTER_REPLY]
      after = request.after_reply unless after.is_a?(Array)
      after.each { |cb| safely { cb.call } } unless after.empty?
    end

    def safely
      yield
    rescue StandardError => e
      @logger.error("response callback failed: #{e.class}: #{e.message}")
    end
  end
end
