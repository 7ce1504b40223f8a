# frozen_string_literal: true

module Narwhal
  class AccessLog
    # Builds one request's line in a buffer of its own and writes it. One
    # per thread that logs (each Responder, and the reactor's thread for the
    # server's own error responses), so that no lock is taken.
    #
    # Cheap by construction: the buffer is reused, the time stamp is built
    # once a second, status codes come from a table, and a string is escaped
    # (copied) only when it holds a byte that needs it.
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
      STATUS = Array.new(1000) { |code| code.to_s.freeze }.freeze
      # for seconds written as 0.000123 (Kernel#format takes 4 times longer)
      WHOLE = Array.new(10) { |n| "#{n}.".freeze }.freeze
      ZEROS = Array.new(7) { |n| ("0" * n).freeze }.freeze

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
        build(@buf, env, status_text(status), headers, bytes, duration, queue_time)
        @log.write(@buf)
      rescue StandardError => e # a log line never breaks a response
        @log.failed(e)
      end

      private

      def status_text(status)
        code = status.is_a?(Integer) ? status : status.to_i
        code.between?(0, 999) ? STATUS[code] : code.to_s
      end

      # X-Request-Id as the client (or the proxy) sent it, else as the
      # response carries it.
      def request_id(env, headers)
        id = env[REQUEST_ID]
        return id if id || headers.nil?

        headers[RESPONSE_REQUEST_ID] || headers[RESPONSE_REQUEST_ID_RACK2]
      end

      # The time stamp of this second (Process.clock_gettime in whole
      # seconds allocates nothing): formatted again only when it changes.
      def stamp(second)
        return @stamp if second == @second

        @second = second
        @stamp = Time.at(second).strftime(self.class::TIME_FORMAT).b.freeze
      end

      # value (seconds, >= 0) with 6 decimals, or none when nil.
      def seconds(buf, value, none)
        return buf << none unless value

        micros = (value * 1_000_000).round
        whole = micros / 1_000_000
        buf << (whole < 10 ? WHOLE[whole] : "#{whole}.")
        frac = (micros - (whole * 1_000_000)).to_s
        buf << ZEROS[6 - frac.bytesize] << frac
      end
    end
  end
end
