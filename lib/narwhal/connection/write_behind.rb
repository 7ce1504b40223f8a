# frozen_string_literal: true

module Narwhal
  class Connection
    # The write-behind phase: the app returned and part of its response
    # waits in the spool (PendingSend); the reactor sends it as the socket
    # takes it (WRITE, #on_writable), then the connection reads again.
    module WriteBehind
      # The socket takes bytes again: sends what it takes of the spool; once
      # all went out, reads again, first the pipelined requests already read.
      def on_writable
        return CLOSE if (done = @send.continue).nil?

        @deadline = @send.deadline
        return WRITE unless done

        @state = IDLE
        return linger if @rejected
        return process if !@send.close_after && @off < @buf.bytesize
        # the head said keep-alive: the client may send the next request now,
        # even once stopping (it is answered with connection: close)
        return CLOSE if @send.close_after

        @deadline = Clock.now + @keepalive_timeout
        KEEP
      end

      private

      # The app returned, part of its response is spooled: the reactor sends
      # it (#on_writable).
      def start_send(outcome)
        @send ||= PendingSend.new(@out, @context.limits.write_timeout, @context.logger)
        @send.start(@env || EMPTY_ENV, outcome != KEEP)
        finish_request
        @state = SEND
        @deadline = @send.deadline
        WRITE
      end
    end
  end
end
