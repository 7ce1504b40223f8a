# frozen_string_literal: true

module Narwhal
  module Dispatcher
    # Request threads (`threads N`): each loop thread of the reactor has
    # its own Responder (and scoreboard sub-slot), set with #serve_here.
    #
    # Shedding (#shed?, asked when a response's head is written, after the
    # app returned): while other reports wait in this worker that no
    # thread of it waits to take, and a sibling worker has an idle thread
    # (blocked waiting for a report, not just between two requests), the
    # response says Connection: close, so that the client's next
    # request reconnects and the kernel gives it to a worker that can serve
    # it now. Reports still waiting once a request has run have waited as
    # long as it took: a burst that a free thread takes at once is no
    # backlog worth a reconnect. With one worker, or every worker full,
    # nothing is shed: that would only cost reconnects.
    class Threaded
      RESPONDER = :narwhal_responder

      # scoreboard/nr: where the siblings' idle threads are read (one
      # worker: never shed).
      def initialize(scoreboard, nr)
        @scoreboard = scoreboard.size > 1 ? scoreboard : nil
        @nr = nr
        @reactor = nil
      end

      # The reactor whose threads serve (#backlog?, #request_starting).
      attr_writer :reactor

      # On a loop thread, before it serves.
      def serve_here(responder)
        Thread.current[RESPONDER] = responder
        # the next connection goes to an idler sibling (#dispatch)
        responder.request_loop&.on_start = @reactor.method(:request_starting) if @scoreboard
      end

      # This thread's RequestLoop, or nil.
      def request_loop
        Thread.current[RESPONDER].request_loop
      end

      def dispatch(request, _connection)
        @reactor.request_starting if @scoreboard # the next connection goes to an idler sibling
        Thread.current[RESPONDER].respond(request)
      end

      def shed?
        !@scoreboard.nil? && @reactor.backlog? && @scoreboard.most_waiting_threads(@nr).positive?
      end
    end
  end
end
