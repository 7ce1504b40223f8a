# frozen_string_literal: true

module Narwhal
  # Where a complete request runs. The reading side (Connection) hands each
  # complete Request (and itself) to #dispatch and is told what became of
  # the connection (Responder's KEEP, CLOSE or HIJACKED), or QUEUED: an app
  # thread will run it and call Connection#after_response (ThreadPool).
  module Dispatcher
    # On the reactor's own thread, at once: while the app runs, the worker
    # waits on nothing, so it accepts nothing (one request at a time per
    # process, as in Unicorn).
    class Inline
      def initialize(responder)
        @responder = responder
      end

      def dispatch(request, _connection)
        @responder.respond(request)
      end
    end
  end
end
