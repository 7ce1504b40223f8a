# frozen_string_literal: true

module Narwhal
  class Reactor
    # How long a worker stops accepting after accept(2) failed for want of
    # resources (no descriptor left in the process or on the machine, no
    # kernel memory for a socket). The listener stays readable meanwhile, so
    # retrying at once would spin: the pause starts at FIRST_PAUSE and
    # doubles on each failure up to MAX_PAUSE; an accept that works resets
    # it. The log gets at most one failure line per REPORT_EVERY, with the
    # failures counted since the previous one, and one line when accepting
    # works again after a reported failure: at most two lines a second even
    # when a worker at its limit gets one descriptor back at a time.
    class AcceptBackoff
      FIRST_PAUSE = 0.01
      MAX_PAUSE = 1.0
      REPORT_EVERY = 1.0

      def initialize(logger)
        @logger = logger
        @pause = nil         # the current pause; nil while accepts work
        @failing_since = nil # first failure since accepts last worked
        @unreported = 0      # failures since the last failure line
        @reported_at = nil
        @reported = false    # a failure line awaits its recovery line
      end

      # True after a failed accept, until one works again.
      def failing?
        !@pause.nil?
      end

      # Records a failed accept at `now`; returns how long to stop accepting.
      def failed(error, now)
        @unreported += 1
        @failing_since ||= now
        @pause = @pause ? [@pause * 2, MAX_PAUSE].min : FIRST_PAUSE
        report(error, now) if @reported_at.nil? || now - @reported_at >= REPORT_EVERY
        @pause
      end

      # An accept worked again.
      def recovered(now)
        @logger.info("accepting again after #{seconds(now - @failing_since)} of failed accepts") if @reported
        @pause = nil
        @failing_since = nil
        @reported = false
      end

      private

      def report(error, now)
        tally = @unreported > 1 ? " (#{@unreported} failed in #{seconds(now - @reported_at)})" : ""
        @logger.error("accept failed: #{reason(error)}; pausing accepts for #{seconds(@pause)}#{tally}")
        @unreported = 0
        @reported_at = now
        @reported = true
      end

      def seconds(value)
        format("%.2fs", value)
      end

      def reason(error)
        case error
        when Errno::EMFILE
          limit = Process.getrlimit(:NOFILE).first
          "too many open files (limit #{limit} per process: raise it with ulimit -n or LimitNOFILE=)"
        when Errno::ENFILE then "too many open files on this machine (fs.file-max)"
        when Errno::ENOSPC
          "epoll watches no more descriptors for this user (fs.epoll.max_user_watches; #{ErrorMessage.strerror(error)})"
        else "the kernel is short of memory for sockets (#{ErrorMessage.strerror(error)})"
        end
      end
    end
  end
end
