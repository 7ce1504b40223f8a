# frozen_string_literal: true

module Narwhal
  class Connection
    # What the C loop (RequestLoop) serving a connection's requests left it
    # to do, as the reactor's actions.
    module LoopResults
      # The RequestLoop accepted it and served its first requests (#accept_serve:
      # result, how many, and rest, the bytes read and not served, or nil,
      # which arrived when the loop's last read did): what now becomes of it.
      def served_first(result, requests, rest, arrived)
        if rest
          @buf = rest
          @arrived = arrived
        end
        # nil: read on (as #on_readable would); epoll reports what is there
        after_loop(result, requests, 0) || KEEP
      end

      private

      # The RequestLoop reads and serves while the requests are common; nil
      # when it left bytes for #process and the reading loop.
      def run_loop(request_loop)
        @state = SERVING # not idle to a graceful stop, nor silent
        before = @requests
        result = request_loop.serve(@fd, @buf, @request, @context, before)
        @arrived = request_loop.arrived # of what it left in @buf, if anything
        after_loop(result, request_loop.requests, before)
      end

      # What the RequestLoop's #serve (or #accept_serve) returned, as an
      # action; nil: Ruby parsed what the loop left and waits for more.
      def after_loop(result, requests, before)
        @requests = requests
        @off = 0 # what the loop left (if anything) is all of @buf
        @state = IDLE
        if result.nil?
          action = process
          action == KEEP ? nil : action
        elsif (@env = @request.env) # what the rest of its response is sent for
          # the Responder finished the last request (the loop did not, so
          # its env is set); requests read after it are served here, what
          # is still unread when epoll reports it
          action = after_response(result)
          action == KEEP && @off < @buf.bytesize ? process : action
        elsif result == KEEP
          # nothing read at all: the deadline it had stands (a new
          # connection's first request is timed from accept)
          @deadline = Clock.now + @keepalive_timeout if @requests > before
          KEEP
        else
          result
        end
      end
    end
  end
end
