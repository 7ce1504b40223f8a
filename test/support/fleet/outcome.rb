# frozen_string_literal: true

module Narwhal
  class Fleet
    # What one event on the fleet came to: every request of the load that
    # ran through it (OpenLoop::Result), the facts the event itself gave
    # (timings, statuses, log lines) and haproxy's states sampled meanwhile.
    Outcome = Struct.new(:results, :facts, :samples) do
      # { 200 => 1480, "Errno::ECONNRESET" => 1, ... }
      def statuses
        results.map { |r| r.status || r.error }.tally
      end

      # The requests not answered with one of `expected`.
      def failed(expected = [200])
        results.reject { |r| expected.include?(r.status) }
      end

      def with_status(status)
        results.select { |r| r.status == status }
      end

      # Which instance answered each 200: { 1 => 500, 2 => 480, 3 => 497 }.
      def by_instance
        with_status(200).map { |r| Integer(r.body[/instance=(\d+)/, 1]) }.tally.sort.to_h
      end

      # Seconds from send to whole answer, of requests with `status`.
      def latencies(status = 200)
        with_status(status).map(&:latency).sort
      end

      # Queue times narwhal gave the app (env["narwhal.queue_time"]) of the 200s.
      def queue_times
        with_status(200).map { |r| Float(r.body[/queue_time=(\S+)/, 1]) }.sort
      end

      # A server's distinct states as sampled, in order: ["UP", "DRAIN (agent)"].
      def states_of(name)
        samples.map { |_, servers| servers[name].first }.chunk_while { |a, b| a == b }.map(&:first)
      end

      # The lowest and the highest weight haproxy gave a server meanwhile.
      def weights_of(name)
        samples.map { |_, servers| servers[name].last }.minmax
      end

      # Requests sent after `time` that `instance` answered.
      def answered_by_after(instance, time)
        with_status(200).count { |r| r.sent > time && r.body.include?("instance=#{instance} ") }
      end

      # Nearest-rank percentile (0..100) of a sorted list; nil when empty.
      def self.percentile(sorted, pct)
        return nil if sorted.empty?

        sorted[[(sorted.size * pct / 100.0).ceil - 1, 0].max]
      end
    end
  end
end
