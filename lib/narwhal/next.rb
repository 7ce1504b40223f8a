# frozen_string_literal: true

module Narwhal
  # What happens to a connection after a step: one vocabulary from the
  # response writer up to the reactor, each layer answering with these and
  # passing on what the layer below answered.
  #
  #   ResponseWriter#write     KEEP, CLOSE or RELEASE (the head's verdict)
  #   Responder#respond        the writer's, or CLOSE when the app failed
  #   RequestLoop#serve        KEEP or CLOSE for what it served itself
  #   Connection#on_readable   the above, or WRITE while its spool waits
  #   Reactor                  does it: re-arm, wait to write, close, forget
  module Next
    KEEP = :keep       # the connection stays: wait for its next request
    WRITE = :write     # part of a response waits in the spool: wait until the socket takes it
    CLOSE = :close     # close the connection
    RELEASE = :release # the app took the socket (rack.hijack): forget it, do not close it
  end
end
