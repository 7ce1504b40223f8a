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
    class Json < Format
      TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"
      MILLIS = Array.new(1000) { |ms| format(".%03d", ms).freeze }.freeze
      NULL = "null"

      private

      def build(buf, env, status, headers, bytes, duration, queue_time)
        ms = Process.clock_gettime(Process::CLOCK_REALTIME, :millisecond)
        second = ms / 1000
        buf << "{\"time\":\"" << stamp(second) << MILLIS[ms - (second * 1000)] << @zone << "\""
        string(buf, ",\"remote_addr\":", env[REMOTE_ADDR])
        string(buf, ",\"remote_user\":", env[REMOTE_USER])
        string(buf, ",\"method\":", env[REQUEST_METHOD])
        string(buf, ",\"uri\":", env[REQUEST_URI])
        string(buf, ",\"protocol\":", env[SERVER_PROTOCOL])
        buf << ",\"status\":" << status << ",\"bytes\":" << bytes.to_s
        seconds(buf << ",\"duration\":", duration, NULL)
        seconds(buf << ",\"queue_time\":", queue_time, NULL)
        string(buf, ",\"request_id\":", request_id(env, headers))
        string(buf, ",\"referer\":", env[REFERER])
        string(buf, ",\"user_agent\":", env[USER_AGENT])
        buf << "}\n"
      end

      def string(buf, key, value)
        buf << key
        return buf << NULL if value.nil?

        Escape.json(buf << "\"", value) << "\""
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
