# frozen_string_literal: true

module Narwhal
  module Dispatcher
    # Request threads (`threads N`): each loop thread of the reactor runs
    # the requests it reads, with its own Responder (and scoreboard
    # sub-slot), set with #serve_here. It answers what the Responder
    # answered and calls nothing above it: the reactor lets the accept gate
    # look again as a thread takes a report, and whether a response is
    # shed is Shedding's, asked by the request when its head is written.
    class Threaded
      RESPONDER = :narwhal_responder

      # On a loop thread, before it serves.
      def serve_here(responder)
        Thread.current[RESPONDER] = responder
      end

      # This thread's RequestLoop, or nil.
      def request_loop
        Thread.current[RESPONDER].request_loop
      end

      def dispatch(request)
        Thread.current[RESPONDER].respond(request)
      end
    end
  end
end
