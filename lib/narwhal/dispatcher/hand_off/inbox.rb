# frozen_string_literal: true

module Narwhal
  module Dispatcher
    class HandOff
      # A worker's side of the line that takes: to the reactor it is one
      # more listener (#io, #accept_nonblock) and the factory of what it
      # accepts (#call), so that it is read only while the worker accepts
      # (an idle thread, room under worker_connections, not stopping). A
      # connection taken becomes a kept-alive Connection of the listener it
      # was accepted from, with the requests it has had.
      class Inbox
        # factories: listener index (HandOff#origin) => Connection::Factory.
        def initialize(hand_off, factories)
          @hand_off = hand_off
          @factories = factories
        end

        def io
          @hand_off.inbox_io
        end

        def accept_nonblock
          @hand_off.take
        end

        # Raises for a listener this worker does not have (the caller logs
        # it and closes the socket).
        def call(taken)
          factory = @factories[taken.origin] or raise ArgumentError, "no listener ##{taken.origin} to adopt into"

          factory.adopt(taken.io, taken.requests)
        end
      end
    end
  end
end
