# frozen_string_literal: true

module Narwhal
  class Request
    # A Request in a worker with request threads: a graceful stop may begin
    # while it waits or runs (the other threads serve on), and its response,
    # whose head is written after the app returns, is then the connection's
    # last; so is it when, by then, requests wait in the worker that no
    # thread of it is free to take while a sibling has one
    # (Dispatcher::Shedding: the client reconnects to a worker that can
    # serve it now).
    # With one thread the stop waits for the request to end.
    class Threaded < Request
      def flags
        close_connection if (@flags & KEEPALIVE) != 0 && @context.shedding&.shed?
        super
      end
    end
  end
end
