# frozen_string_literal: true

module Narwhal
  class Connection
    # A request's body, read as it arrives into Request::Input (memory,
    # then a temporary file) under client_body_timeout, with
    # `Expect: 100-continue` answered once the head is read.
    module Body
      CONTINUE = "HTTP/1.1 100 Continue\r\n\r\n"

      private

      # False when a 100 Continue could be neither sent nor spooled: close.
      def start_body
        length = @parser.content_length
        if @parser.chunked? || (length && length.positive?)
          @state = BODY
          @input = Request::Input.new(@context.limits.body_buffer_size, @parser.chunked? ? nil : length)
          return @out.write_or_spool(CONTINUE) if @parser.expect_continue? && @parser.http11? && @off >= @buf.bytesize
        else
          @state = IDLE
        end
        true
      rescue ClientGone
        false
      end

      # Moves buffered body bytes into @input; true when the body is complete.
      def read_body
        @off = @input.take(@parser, @env, @buf, @off)
        if @input.complete?
          @state = IDLE
          return true
        end
        # a read ending inside a chunk-size line leaves it unconsumed; drop
        # the decoded bytes before it, or @buf would grow with the body
        discard_consumed
        false
      end
    end
  end
end
