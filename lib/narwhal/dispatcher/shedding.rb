# frozen_string_literal: true

module Narwhal
  module Dispatcher
    # Whether a response's connection is shed (request threads, siblings),
    # asked when its head is written, after the app returned (Request's
    # flags): while other reports wait in this worker that no thread of it
    # waits to take, and a sibling worker has an idle thread (blocked
    # waiting for a report, not just between two requests), the response
    # says Connection: close, so that the client's next request reconnects
    # and the kernel gives it to a worker that can serve it now. Reports
    # still waiting once a request has run have waited as long as it took:
    # a burst that a free thread takes at once is no backlog worth a
    # reconnect. With one worker, or every worker full, nothing is shed:
    # that would only cost reconnects. Request (keepalive_rebalance) asks
    # #sibling_idle? with one thread per worker too.
    class Shedding
      # poller: this worker's epoll set (its threads waiting, its reports
      # pending); scoreboard/nr: where the siblings' idle threads are read.
      def initialize(poller, scoreboard, nr)
        @poller = poller
        @scoreboard = scoreboard
        @nr = nr
      end

      def shed?
        saturated? && sibling_idle?
      end

      # No thread of this worker waits for reports, and reports wait for
      # one (keepalive_release hands idle connections on then).
      def saturated?
        @poller.waiting.zero? && @poller.pending?
      end

      # A sibling worker has a thread blocked waiting for work: a
      # connection let go now is taken there (keepalive_rebalance).
      def sibling_idle?
        siblings_waiting.positive?
      end

      # The most threads a sibling has waiting for work.
      def siblings_waiting
        @scoreboard.most_waiting_threads(@nr)
      end
    end
  end
end
