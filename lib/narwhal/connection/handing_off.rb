# frozen_string_literal: true

module Narwhal
  class Connection
    # Moving between sibling workers (keepalive_release,
    # Dispatcher::HandOff): an idle kept-alive connection is given away by
    # a saturated worker and adopted by one with an idle thread.
    module HandingOff
      # The index of the shared listener it was accepted from
      # (HandOff#origin); nil: it stays in this worker.
      attr_reader :origin

      # Puts its socket on the line; true when it went (the caller then
      # closes this worker's descriptor).
      def give_to(hand_off)
        !@origin.nil? && hand_off.give(@io, @origin, @requests)
      end

      # Adopted from a sibling after requests on it: idle, with a whole
      # keepalive_timeout ahead (what its client was told is counted from
      # its last response, which is earlier).
      def handed_over(requests)
        @requests = requests
        @request.handed_over(requests)
        @deadline = Clock.now + @keepalive_timeout
        self
      end
    end
  end
end
