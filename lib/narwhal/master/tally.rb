# frozen_string_literal: true

module Narwhal
  class Master
    # What happened to the master's workers since it started, counted where
    # it happens (forks, kills, recycling) and read by the control
    # listener's /metrics. Counts live in the master alone: a re-exec'd
    # master starts from zero, as Prometheus counters may.
    class Tally
      # respawns:          workers forked to replace one that exited
      # timeout_kills:     workers killed for `timeout`
      # memory_recycles:   workers retired for `worker_memory_limit`
      # request_recycles:  workers retired for `worker_max_requests`
      EVENTS = %i[respawns timeout_kills memory_recycles request_recycles].freeze

      def initialize
        @counts = EVENTS.to_h { |event| [event, 0] }
      end

      def count(event, by = 1)
        raise ArgumentError, "unknown event #{event.inspect}" unless @counts.key?(event)

        @counts[event] += by
      end

      def [](event)
        @counts.fetch(event)
      end

      def to_h
        @counts.dup
      end
    end
  end
end
