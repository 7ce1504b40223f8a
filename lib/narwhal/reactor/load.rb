# frozen_string_literal: true

module Narwhal
  class Reactor
    # How busy the reactor is, as its acceptors and the server ask it:
    # connections held, a crowd (request threads), threads waiting.
    module Load
      def handler_count
        @handlers.size
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
    end
  end
end
