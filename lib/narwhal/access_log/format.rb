# frozen_string_literal: true

module Narwhal
  class AccessLog
    # Builds one request's line in a buffer of its own and writes it. One
    # per thread that logs (each Responder, and the reactor's thread for the
    # server's own error responses), so that no lock is taken.
    #
    # Cheap by construction: the buffer is reused, the time stamp is built
    # once a second, and the line is put together in one call to C
    # (AccessLogLine), which copies a string whole unless it holds a byte
    # that needs escaping.
    class Format
      REMOTE_ADDR = Request::REMOTE_ADDR
      REMOTE_USER = "REMOTE_USER"
      REQUEST_METHOD = Request::REQUEST_METHOD
      REQUEST_URI = "REQUEST_URI"
      SERVER_PROTOCOL = "SERVER_PROTOCOL"
      REFERER = "HTTP_REFERER"
      USER_AGENT = "HTTP_USER_AGENT"
      REQUEST_ID = "HTTP_X_REQUEST_ID"
      # the response's, when the request had none (Rails makes one)
      RESPONSE_REQUEST_ID = "x-request-id"
      RESPONSE_REQUEST_ID_RACK2 = "X-Request-Id"

      def initialize(log)
        @log = log
        @buf = String.new(capacity: 512, encoding: Encoding::BINARY)
        @second = nil
        @stamp = nil
      end

      # One request's line. status: an Integer (or what the app returned);
      # headers: the response's (nil when the server answered); bytes: body
      # bytes; duration, queue_time: seconds, or nil when unknown.
      def record(env, status, headers, bytes, duration, queue_time)
        @buf.clear
        build(@buf, env, status, headers, bytes, duration, queue_time)
        @log.write(@buf)
      rescue StandardError => e # a log line never breaks a response
        @log.failed(e)
      end

      private

      # X-Request-Id as the client (or the proxy) sent it, else as the
      # response carries it.
      def request_id(env, headers)
        id = env[REQUEST_ID]
        return id if id || headers.nil?

        id = headers[RESPONSE_REQUEST_ID] || headers[RESPONSE_REQUEST_ID_RACK2]
        id.is_a?(Array) ? id.join(", ") : id # Rack 3 allows a list of values
      end

      # The time stamp of this second (Process.clock_gettime in whole
      # seconds allocates nothing): formatted again only when it changes.
      def stamp(second)
        return @stamp if second == @second

        @second = second
        @stamp = Time.at(second).strftime(self.class::TIME_FORMAT).b.freeze
      end
    end
  end
end
