# frozen_string_literal: true

module Narwhal
  class Master
    class WorkerMonitor
      # Why a worker was killed for `timeout`, as the log line says it and
      # the after_worker_timeout hook receives it: seconds on its oldest
      # request, the limit, that request's method and path (from the
      # scoreboard, truncated; nil when it finished meanwhile), how many
      # other requests died with it, and what its clients were answered
      # before the kill (StrandedRequests): 504s to requests that had not
      # begun their response, 503s to requests that waited unread.
      TimeoutInfo = Struct.new(:elapsed, :timeout, :request_method, :path, :other_requests, :answered,
                               :answered_waiting, keyword_init: true) do
        def to_s
          request = request_method ? " on #{request_method} #{path}" : ""
          "timeout (#{elapsed.round(3)}s > #{timeout}s)#{request}, killing; #{others_in_flight}#{answers}"
        end

        private

        def others_in_flight
          case other_requests
          when 0 then "no other request in flight"
          when 1 then "1 other request in flight dies with it"
          else "#{other_requests} other requests in flight die with it"
          end
        end

        def answers
          return "" unless answered

          "; answered 504 to #{answered} #{answered == 1 ? 'request' : 'requests'}, " \
            "503 to #{answered_waiting} waiting"
        end
      end

      # A worker on one request for longer than `timeout` seconds is killed
      # (and replaced by the master); idle workers never time out. The kill
      # takes the worker's other requests with it (its other threads'): the
      # log line names the request that ran too long and says how many
      # others were in flight just before it.
      #
      # Just before, each thread on a request past the timeout is asked for
      # its backtrace (BacktraceSignal), and the master waits for it (at
      # most BACKTRACE_WAIT): the log then shows where the app was stuck,
      # even in C with the GVL held, where no Ruby code can run. It is
      # asked only then, not earlier: the signal ends a sleep(3) or poll(2)
      # in C early, which must not change a request that would still finish
      # in time.
      class Timeout
        BACKTRACE_WAIT = 0.2 # seconds
        BACKTRACE_POLL = 0.005 # seconds between two looks at the scoreboard

        def initialize(seconds, logger)
          @seconds = seconds
          @logger = logger
        end

        def signal
          :KILL
        end

        # How often the master must look: twice per timeout.
        def interval
          @seconds / 2.0
        end

        def due?(_now)
          true
        end

        # A TimeoutInfo, or nil while the worker is within its timeout.
        def breach(worker, scoreboard)
          busy = scoreboard.busy_for(worker.nr) # the oldest request's; nothing allocated
          return unless busy && busy > @seconds

          in_flight = scoreboard.requests_in_flight(worker.nr)
          backtraces(worker, scoreboard, in_flight.select { |request| request.seconds > @seconds })
          oldest = in_flight.first
          oldest = nil if oldest&.request_method&.empty? # a request started without its name
          TimeoutInfo.new(elapsed: busy, timeout: @seconds, request_method: oldest&.request_method,
                          path: oldest&.path, other_requests: [in_flight.size - 1, 0].max)
        end

        private

        def backtraces(worker, scoreboard, late)
          asked = late.select { |request| ask_backtrace(worker, request) }
          return if asked.empty?

          deadline = Clock.now + BACKTRACE_WAIT
          sleep BACKTRACE_POLL until Clock.now > deadline || asked.all? { |r| written?(scoreboard, worker, r) }
        end

        def written?(scoreboard, worker, request)
          scoreboard.backtraces(worker.nr, request.thread) > request.backtraces
        end

        def ask_backtrace(worker, request)
          return false if request.tid.zero?

          @logger.error("worker=#{worker.nr} pid=#{worker.pid} #{request} has run #{request.seconds.round(3)}s, " \
                        "past timeout (#{@seconds}s); where it is (tid=#{request.tid}):")
          BacktraceSignal.request(worker.pid, request.tid)
        rescue SystemCallError => e
          @logger.error("worker=#{worker.nr} no backtrace: #{ErrorMessage.for(e)}")
          false
        end
      end
    end
  end
end
