# frozen_string_literal: true

module Narwhal
  class Server
    # A worker's part in the master's Dispatcher::HandOff line: it takes
    # the connections siblings give (always, with siblings: a sibling may
    # give while this worker's own keepalive_release is off, after a HUP)
    # and, with keepalive_release, gives its own idle ones when saturated.
    module HandingOff
      private

      # In #run, once the listeners are in the reactor (#accept_from keeps
      # their factories by origin).
      def join_hand_off
        shedding = @context.shedding
        return unless @hand_off && shedding

        @inbox = Dispatcher::HandOff::Inbox.new(@hand_off, @factories)
        @reactor.add_listener(@inbox, @inbox)
        grace = @config[:keepalive_release]
        @release = grace && Dispatcher::HandOff::Release.new(@hand_off, @inbox, shedding, grace, @counters)
      end

      # At every sweep, until a stop began.
      def release_idle
        @release.sweep(@reactor, Clock.now) unless @context.stopping
      end
    end
  end
end
