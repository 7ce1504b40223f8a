# frozen_string_literal: true

module Narwhal
  # Reading a SocketWriter's output from the other end of its socket pair
  # while doing the reactor's part (flush_nonblock) for what it spooled.
  # Include it; it reads from @peer what @writer sends.
  module SpoolReading
    def receive(bytes)
      got = +""
      while got.bytesize < bytes
        @writer.flush_nonblock if @writer.pending?
        r = @peer.read_nonblock(1 << 20, exception: false)
        got << r if r.is_a?(String)
      end
      got
    end
  end
end
