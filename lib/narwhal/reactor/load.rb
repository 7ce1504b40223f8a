# frozen_string_literal: true

module Narwhal
  class Reactor
    # How busy the reactor is, as the dispatcher and the AcceptGate ask it
    # (request threads): connections held, reports no thread waits for, a
    # crowd, threads waiting; and the hook a thread calls before it runs a
    # request.
    module Load
      def handler_count
        @handlers.size
      end

      # Reports wait that no thread waits to take (request threads).
      def backlog?
        @poller.waiting.zero? && @poller.pending?
      end

      # Request threads: this worker's connections wait (for a thread or for
      # their clients) and no other thread waits for reports. A listener's
      # report then lets in the connections waiting behind it (Acceptors).
      def crowded?
        @threaded && @poller.waiting.zero? && @handlers.size > @poller.owned
      end

      # Mirrors the threads waiting for reports (idle) into worker_slot.
      def publish_waiting(worker_slot)
        @poller.publish_waiting(worker_slot)
      end

      # A loop thread is about to run a request (request threads, siblings).
      def request_starting
        @acceptors.request_starting
      end
    end
  end
end
