# frozen_string_literal: true

module Narwhal
  class AccessLog
    # One JSON object per line (JSON Lines), keys always present, null for
    # what is unknown:
    #
    #   {"time":"2026-11-23T10:00:00.123+00:00","remote_addr":"127.0.0.1","remote_user":null,
    #    "method":"GET","uri":"/a?b=1","protocol":"HTTP/1.1","status":200,"bytes":5,
    #    "duration":0.000214,"queue_time":0.001532,"request_id":"f3a1","referer":null,
    #    "user_agent":"curl/7.88.1"}
    #
    # Strings keep their UTF-8; the quote, the backslash and control
    # characters are escaped, and the bytes of a string that is not valid
    # UTF-8 are written as \u00HH (JSON has no bytes).
    class Json < Format
      TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"

      private

      def build(buf, env, status, headers, bytes, duration, queue_time)
        ms = Process.clock_gettime(Process::CLOCK_REALTIME, :millisecond)
        second = ms / 1000
        AccessLogLine.json(buf, stamp(second), ms - (second * 1000), @zone, env[REMOTE_ADDR], env[REMOTE_USER],
                           env[REQUEST_METHOD], env[REQUEST_URI], env[SERVER_PROTOCOL], status, bytes, duration,
                           queue_time, request_id(env, headers), env[REFERER], env[USER_AGENT])
      end

      # The zone's offset is part of the stamp's second (it changes with
      # daylight saving time).
      def stamp(second)
        return @stamp if second == @second

        @zone = Time.at(second).strftime("%:z").b.freeze
        super
      end
    end
  end
end
