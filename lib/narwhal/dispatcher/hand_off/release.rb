# frozen_string_literal: true

module Narwhal
  module Dispatcher
    class HandOff
      # keepalive_release: at each sweep of a worker that is saturated (no
      # thread waits, reports wait for one) while a sibling has an idle
      # thread, its kept-alive connections idle for at least the grace go
      # to the line (HandOff#give), where the sibling takes them. A request
      # sent on one of them would otherwise wait here for a thread, and with
      # keepalive_rebalance cost a reconnect after it; the grace keeps a
      # connection between two close requests where it is.
      class Release
        # inbox: this worker's Inbox; shedding: Dispatcher::Shedding
        # (saturation, siblings' idle threads); grace: seconds idle;
        # counters: the worker's slot.
        def initialize(hand_off, inbox, shedding, grace, counters)
          @hand_off = hand_off
          @inbox = inbox
          @shedding = shedding
          @grace = grace
          @counters = counters
        end

        # At most as many as the idlest sibling has threads waiting: one
        # woken for the line takes what it can serve now. Until its next
        # sweep a worker that gave takes nothing from the line, where it
        # would find its own before the sibling the kernel woke for them.
        def sweep(reactor, now)
          room = @shedding.saturated? ? @shedding.siblings_waiting : 0
          given = room.positive? ? reactor.release_idle(now - @grace, room) { |c| give(c) } : 0
          reactor.hold_out(@inbox, given.positive?)
        end

        private

        # True when it went on the line (the reactor then closes this
        # worker's descriptor of it).
        def give(connection)
          return false unless connection.give_to(@hand_off)

          @counters.count(Scoreboard::CONNECTIONS_HANDED_OFF)
          true
        end
      end
    end
  end
end
