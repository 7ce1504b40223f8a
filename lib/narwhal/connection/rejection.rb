# frozen_string_literal: true

module Narwhal
  class Connection
    # A request the connection will not serve: its 4xx goes out (or to the
    # spool, sent by the reactor), then the connection lingers, reading and
    # dropping what the client still sends for at most LINGER_SECONDS or
    # LINGER_MAX_BYTES, so that closing does not reset the connection before
    # the client reads the answer.
    module Rejection
      LINGER_SECONDS = 2
      LINGER_MAX_BYTES = 1024 * 1024

      private

      # Answers a request we will not serve, then drains and closes: at once
      # when the socket took the answer, else once the reactor sent it from
      # the spool (#on_writable).
      def reject(status)
        @context.counters.count(Scoreboard::REQUESTS_REJECTED)
        return CLOSE unless send_error(status)
        return linger unless @out.pending?

        @rejected = true
        start_send(CLOSE)
      end

      # The answer is sent: no more bytes from us; what the client still
      # sends is read and dropped until it closes or LINGER_SECONDS pass.
      def linger
        @io.shutdown(Socket::SHUT_WR)
        @state = LINGER
        @lingered = 0
        @deadline = Clock.now + LINGER_SECONDS
        KEEP
      rescue IOError, SystemCallError
        CLOSE
      end

      # No room for the body (or no temporary file): free what was stored,
      # log the cause once and answer like any request we cannot serve.
      def refuse_body(error)
        @input.close
        @input = nil
        @context.logger.error("request body of #{@env[REQUEST_METHOD]} #{@env[PATH_INFO]} not stored: " \
                              "#{error.message}; answered #{error.status}, closing")
        reject(error.status)
      end

      # Sent or spooled, never waited for; false when neither (close at
      # once). Logged as far as the request was read (no duration, no queue
      # time).
      def send_error(status)
        head = @request.head?
        @context.access_log&.refused(@env || EMPTY_ENV, status, ResponseWriter::ErrorResponse.body_bytesize(status, head: head))
        @out.write_or_spool(ResponseWriter::ErrorResponse.bytes(status, head: head))
      rescue IOError, SystemCallError
        false
      end
    end
  end
end
