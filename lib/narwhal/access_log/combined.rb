# frozen_string_literal: true

module Narwhal
  class AccessLog
    # Apache's and nginx's combined format, then three fields of our own:
    # the duration, the queue time (seconds, `-` without one) and the
    # request id (quoted, `-` without one).
    #
    #   127.0.0.1 - - [23/Nov/2026:10:00:00 +0000] "GET /a?b=1 HTTP/1.1" 200 5 "-" "curl/7.88.1" 0.000214 0.001532 "f3a1"
    #
    # Parsers of the combined format read the first nine fields and ignore
    # the rest. Request data is escaped as nginx escapes it: the quote, the
    # backslash, control and non-ASCII bytes as \xHH, and in the bare
    # fields (address, user) the space too. An absent or empty field is
    # `-`; the request line is `-` when its method was not read.
    class Combined < Format
      TIME_FORMAT = "[%d/%b/%Y:%H:%M:%S %z]"

      private

      def build(buf, env, status, headers, bytes, duration, queue_time)
        AccessLogLine.combined(buf, stamp(Process.clock_gettime(Process::CLOCK_REALTIME, :second)),
                               env[REMOTE_ADDR], env[REMOTE_USER], env[REQUEST_METHOD], env[REQUEST_URI],
                               env[SERVER_PROTOCOL], status, bytes, env[REFERER], env[USER_AGENT], duration, queue_time,
                               request_id(env, headers))
      end
    end
  end
end
