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
    # the rest.
    class Combined < Format
      TIME_FORMAT = "[%d/%b/%Y:%H:%M:%S %z] \""
      DASH = "-"
      QUOTED_DASH = "\"-\""

      private

      def build(buf, env, status, headers, bytes, duration, queue_time)
        Escape.combined(buf, env[REMOTE_ADDR] || DASH, bare: true)
        buf << " - "
        Escape.combined(buf, present(env[REMOTE_USER]) || DASH, bare: true)
        buf << " " << stamp(Process.clock_gettime(Process::CLOCK_REALTIME, :second))
        request_line(buf, env)
        buf << "\" " << status << " " << bytes.to_s << " "
        quoted(buf, env[REFERER])
        buf << " "
        quoted(buf, env[USER_AGENT])
        seconds(buf << " ", duration, DASH)
        seconds(buf << " ", queue_time, DASH)
        buf << " "
        quoted(buf, request_id(env, headers))
        buf << "\n"
      end

      # "METHOD URI PROTOCOL" as far as the request was read; "-" when its
      # method was not.
      def request_line(buf, env)
        method = env[REQUEST_METHOD]
        return buf << DASH unless method

        Escape.combined(buf, method)
        uri = env[REQUEST_URI]
        Escape.combined(buf << " ", uri) if uri
        protocol = env[SERVER_PROTOCOL]
        Escape.combined(buf << " ", protocol) if protocol
        buf
      end

      def quoted(buf, value)
        value = present(value)
        return buf << QUOTED_DASH unless value

        Escape.combined(buf << "\"", value) << "\""
      end

      def present(value)
        value unless value.nil? || (value.respond_to?(:empty?) && value.empty?)
      end
    end
  end
end
