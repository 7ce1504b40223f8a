# frozen_string_literal: true

module Narwhal
  module Dispatcher
    # One thread (`threads 1`): while the app runs, the worker waits on
    # nothing, so it accepts nothing (one request at a time per process,
    # as in Unicorn).
    class Inline
      def initialize(responder)
        @responder = responder
      end

      def dispatch(request)
        @responder.respond(request)
      end

      # The RequestLoop that serves the common requests, or nil.
      def request_loop
        @responder.request_loop
      end
    end
  end
end
