# frozen_string_literal: true

module Narwhal
  class Responder
    # How long a request waited before the server started on it, taken
    # once per request just before the app runs (with request threads,
    # after the wait for a thread): into env (narwhal.queue_time, seconds)
    # and into the worker's histogram of its source.
    #
    # Two sources. The proxy's X-Request-Start (or X-Queue-Start), when
    # trusted (trust_x_request_start, on by default) and usable: it counts
    # the proxy's own queue too. Else the kernel's: when the request's
    # first bytes arrived (Arrival, TCP only), which counts the wait in
    # the listen queue or, on a kept-alive connection, for a free thread.
    #
    # The header, as the proxies write it: nginx `t=${msec}` (seconds with
    # a fraction), HAProxy and Heroku (milliseconds), Apache mod_headers
    # `%t` (microseconds); the `t=` is optional. The unit is told by the
    # size of the number.
    #
    # The clock is the wall clock, so that of another host: a stamp a little
    # in the future (clocks a little apart) counts as no wait; one further
    # ahead, or older than any request waits, is not a time we can trust and
    # gives nothing (the kernel's figure is taken then).
    class QueueTime
      ENV_KEY = "narwhal.queue_time"
      REQUEST_START = "HTTP_X_REQUEST_START"
      QUEUE_START = "HTTP_X_QUEUE_START"

      # A stamp at most this far (seconds) ahead of our clock is taken as a
      # wait of 0: the proxy's clock runs a little ahead of ours.
      MAX_CLOCK_SKEW = 1.0
      # A stamp older than this (seconds) is garbage, not a wait: no proxy
      # holds a request an hour.
      MAX_AGE = 3600.0

      # "t=" (optional), up to 19 digits, an optional fraction.
      FORMAT = /\A(?:t=)?\d{1,19}(?:\.\d{1,9})?\z/
      T = 116 # "t"

      HEADER = Scoreboard::QUEUE_TIME_HEADER
      KERNEL = Scoreboard::QUEUE_TIME_KERNEL

      # slot: the thread's scoreboard slot (its worker's histograms);
      # trust_header: whether the proxy's header is taken.
      def initialize(slot, trust_header: true)
        @slot = slot
        @trust_header = trust_header
      end

      # The request's queue time in seconds (a Float; nil when neither
      # source has one: a Unix socket's request without a usable header),
      # into env and the histogram. Allocates nothing.
      def measure(request, env)
        seconds = QueueTime.seconds(env) if @trust_header && request.queue_stamp?
        if seconds
          @slot.queue_time(seconds, HEADER)
        else
          seconds = request.waited or return # taken as the request was complete

          @slot.queue_time(seconds, KERNEL)
        end
        env[ENV_KEY] = seconds
      end

      # Seconds since the proxy's stamp (a Float), or nil without a usable
      # one. Allocates nothing when the headers are absent (the usual case
      # without a proxy): two hash lookups.
      def self.seconds(env, now = nil)
        stamp = env[REQUEST_START] || env[QUEUE_START]
        return unless stamp

        started = parse(stamp)
        return unless started

        waited = (now || Process.clock_gettime(Process::CLOCK_REALTIME)) - started
        return if waited > MAX_AGE || waited < -MAX_CLOCK_SKEW

        waited.negative? ? 0.0 : waited
      end

      # The stamp as seconds since the epoch, or nil when it is not one.
      def self.parse(stamp)
        return unless stamp.is_a?(String) && stamp.match?(FORMAT)

        number = (stamp.getbyte(0) == T ? stamp.byteslice(2, stamp.bytesize) : stamp).to_f
        # seconds until the year 5138, then ms, us, ns
        if number >= 1e17 then number / 1e9
        elsif number >= 1e14 then number / 1e6
        elsif number >= 1e11 then number / 1e3
        else number
        end
      end
    end
  end
end
