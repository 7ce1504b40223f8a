# frozen_string_literal: true

module Narwhal
  class Connection
    # What the reactor asks when it needs room (worker_connections) or
    # stops: may this connection be closed without losing a request?
    module Idleness
      # Between requests on a kept-alive connection, with nothing buffered: a
      # graceful stop may close it. A new connection is not idle: its first
      # request is on its way.
      def idle?
        @state == IDLE && @requests.positive? && @off >= @buf.bytesize
      end

      # Idle (#idle?) since time or earlier (its deadline is keepalive_timeout
      # from when it became idle), with no request waiting in the socket
      # either: one whose request is there is served where it is.
      def idle_since?(time)
        idle? && @deadline - @keepalive_timeout <= time && nothing_waiting?
      end

      # Has not sent a byte since it was accepted: at the connection limit it
      # makes room after the idle kept-alive ones (closing it loses nothing
      # it sent, and keeping it would leave clients that send in the listen
      # queue).
      def silent?
        @state == IDLE && @requests.zero? && @buf.empty? && nothing_waiting?
      end

      private

      # Nothing in the socket either (a connection taken by a drain, or one
      # waiting for a busy thread, may have its request there unread).
      def nothing_waiting?
        @io.recv_nonblock(1, Socket::MSG_PEEK, exception: false) == :wait_readable
      rescue IOError, SystemCallError
        false
      end
    end
  end
end
