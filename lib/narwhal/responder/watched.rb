# frozen_string_literal: true

module Narwhal
  class Responder
    # A Responder under soft_timeout: each request runs under the thread's
    # SoftTimeout::Watch, and Narwhal::RequestTimeout can interrupt the
    # app's code only (the call, the body's each/call/close), never the
    # writes to the socket within it. It is answered here: 503 while no
    # response byte went out, else the connection closes; logged with its
    # backtrace; rack.response_finished gets it. on_timeout then tells the
    # worker its app may be broken. A class of its own so that without
    # soft_timeout the request path has no step for it.
    class Watched < Responder
      FAILURES = [RequestTimeout, *Responder::FAILURES].freeze

      # soft_timeout: this thread's SoftTimeout::Watch. on_timeout: called,
      # on this thread, once a request's app code was interrupted by it (the
      # worker may want to retire). The other options are Responder's.
      def initialize(app, logger, slot, counters, soft_timeout:, on_timeout: nil, **options)
        super(app, logger, slot, counters, **options)
        @watch = soft_timeout
        @on_timeout = on_timeout
        @request_loop = nil # every request runs under the watch, here
        @timeout_logged = false
      end

      def respond(request)
        outcome = @watch.serve { super }
        interrupted(request.env) if @watch.interrupted?
        outcome
      end

      private

      def failures
        FAILURES
      end

      def run_app(env)
        @watch.interruptible { @app.call(env) }
      end

      def write(out, status, headers, body, flags)
        watched = @watch.writer(out)
        @watch.interruptible { @writer.write(watched, status, headers, body, flags) }
      end

      def close_app_body(body)
        @watch.interruptible { body.close }
      end

      def failed(request, env, error)
        return super unless error.is_a?(RequestTimeout)

        @error = error
        request_timeout(request, env, error)
        CLOSE
      end

      def close_body(request, env, body)
        super
      rescue RequestTimeout => e
        @error ||= e
        request_timeout(request, env, e, in_close: true)
      end

      # soft_timeout interrupted the app: 503 while no response byte went
      # out (it closes the connection), else the connection just closes. In
      # body.close the answer is already decided (sent, or an error's).
      def request_timeout(request, env, error, in_close: false)
        @timeout_logged = true
        @counters.count(Scoreboard::REQUEST_TIMEOUTS)
        answer = if in_close then "in body.close, after the response"
                 elsif request.hijacked? then "the app had taken the connection"
                 elsif @watch.response_started? then "response cut short, closing"
                 else "answered 503, closing"
                 end
        @logger.error("request timeout: #{env[REQUEST_METHOD]} #{env[PATH_INFO]} ran #{elapsed}s, past " \
                      "soft_timeout (#{@watch.seconds}s); #{answer}#{ErrorMessage.backtrace(error)}")
        return if in_close || @watch.response_started? || request.hijacked?

        @answered = 503
        request.out.write(ResponseWriter::ErrorResponse.bytes(503, head: request.head?))
      rescue IOError, SystemCallError
        nil
      end

      # After the request: its app code took a RequestTimeout. Logged above
      # unless the app rescued it and answered itself.
      def interrupted(env)
        unless @timeout_logged
          @counters.count(Scoreboard::REQUEST_TIMEOUTS)
          @logger.error("request timeout: #{env[REQUEST_METHOD]} #{env[PATH_INFO]} was interrupted past " \
                        "soft_timeout (#{@watch.seconds}s), but the app rescued #{RequestTimeout} and answered itself")
        end
        @timeout_logged = false
        @on_timeout&.call
      end

      def elapsed
        busy = @slot.busy_for
        busy ? busy.round(3) : "?"
      end
    end
  end
end
