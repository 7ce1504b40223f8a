# frozen_string_literal: true

module Narwhal
  # Runs the app for one complete request and writes its response: marks
  # the scoreboard (the master's `timeout` clock), calls the app, writes the
  # response, closes the body, runs rack.response_finished and
  # rack.after_reply, and says what becomes of the connection: KEEP it for
  # the next request, CLOSE it, or HIJACKED (the app took the socket).
  #
  # One per thread that runs the app (one per worker today). It keeps the
  # current response's status, headers and error in instance variables,
  # not in an array per request, and forgets them once it is done.
  class Responder
    KEEP = :keep
    CLOSE = :close
    HIJACKED = :hijacked

    REQUEST_METHOD = Request::REQUEST_METHOD
    PATH_INFO = Request::PATH_INFO

    # slot: the calling thread's scoreboard slot; counters: the worker's.
    def initialize(app, logger, slot, counters)
      @app = app
      @logger = logger
      @slot = slot
      @counters = counters
      @writer = ResponseWriter.new(logger)
    end

    def respond(request)
      env = request.env
      @slot.request_started
      begin
        outcome = call_app(request, env)
        run_callbacks(request, env)
      ensure
        @status = @headers = @error = nil
        @slot.request_finished
      end
      outcome
    end

    private

    # The outcome; CLOSE on any failure, which is kept in @error.
    def call_app(request, env)
      status, headers, body = @app.call(env)
      return HIJACKED if request.hijacked?

      @status = status
      @headers = headers
      written = @writer.write(request.out, status, headers, body, request.flags)
      return KEEP if written == true

      written == ResponseWriter::HIJACKED || request.hijacked? ? HIJACKED : CLOSE
    rescue WriteTimeout => e
      @logger.warn("write timeout: #{e.message}, closing (#{env[REQUEST_METHOD]} #{env[PATH_INFO]})")
      @error = e
      CLOSE
    rescue ClientGone => e
      # only failed socket writes: the app's own I/O errors are app errors
      @logger.debug { "client went away: #{e.message}" }
      @error = e
      CLOSE
    rescue StandardError, ScriptError => e
      @error = e
      app_error(request, env, e)
      CLOSE
    ensure
      close_body(body)
    end

    def app_error(request, env, error)
      @counters.count(Scoreboard::APP_ERRORS)
      @logger.error("app error: #{error.class}: #{error.message} " \
                    "(#{env[REQUEST_METHOD]} #{env[PATH_INFO]})#{ErrorMessage.backtrace(error)}")
      # @status is set once the app returned: only then can bytes have gone out
      return if (@status && @writer.started) || request.hijacked?

      request.out.write(ErrorResponse.bytes(500, head: request.head?))
    rescue IOError, SystemCallError
      nil
    end

    def close_body(body)
      body.close if body.respond_to?(:close)
    rescue StandardError => e
      @logger.error("body.close failed: #{e.class}: #{e.message}")
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
