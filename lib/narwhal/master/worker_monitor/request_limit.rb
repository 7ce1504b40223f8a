# frozen_string_literal: true

module Narwhal
  class Master
    class WorkerMonitor
      # `worker_max_requests N, jitter: J`: a worker that has served its
      # limit is recycled (replacement first, as for memory). Each worker's
      # limit is N plus a whole number from 0 to J drawn from its pid, so
      # workers forked together retire at different times, and the same
      # worker's limit reads the same on every pass without being stored.
      # The count is the scoreboard's (every request thread's, read without
      # asking the worker); the worker serves on while its replacement
      # boots, so it ends a little past its limit.
      class RequestLimit
        def initialize(count, jitter)
          @count = count
          @jitter = jitter
        end

        def signal
          :QUIT
        end

        def event
          :request_recycles
        end

        # Counting is cheap: every pass looks, at least once a second.
        def interval
          Master::MAX_SLEEP
        end

        def due?(_now)
          true
        end

        def limit_for(pid)
          @count + Random.new(pid).rand(@jitter + 1)
        end

        def breach(worker, scoreboard)
          served = scoreboard.requests(worker.nr)
          limit = limit_for(worker.pid)
          return if served < limit

          "served #{served} requests, worker_max_requests #{limit} (#{@count} + jitter #{limit - @count}), recycling"
        end
      end
    end
  end
end
