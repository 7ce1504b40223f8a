# frozen_string_literal: true

module Narwhal
  class Reactor
    class Acceptors
      # What an AcceptGate (request threads) asks of the acceptors: the gate
      # opened and closed as threads are busy, new connections claiming a
      # thread, the listeners taking their turn behind siblings, and a crowded
      # worker (Reactor#crowded?) letting in its share of what waits.
      module Gating
        # Connections a crowded worker lets in at most at one turn.
        CROWD_MAX = 64
        # How often a crowded worker looks at its listen queues (#admit).
        ADMISSION_INTERVAL = 0.001

        # A loop thread took a report (Reactor#dispatch) and is busy from
        # now: the gate looks again with that thread counted busy (its
        # scoreboard sub-slot does not say so yet), so that a sibling with
        # more idle threads gets the next connection.
        def request_starting
          check_gate(Clock.now, 1) unless @gate_open && @gate.alone?
        end

        # Holds one listener out of the epoll set (on), or lets it back in
        # with the others: the line of sibling connections while its worker
        # gives its own away (Dispatcher::HandOff::Release), which it would
        # otherwise take back itself before the sibling woken for it.
        def hold_out(listener, on)
          fd = listener.io.fileno
          @lock.synchronize do
            next if @held_out.key?(fd) == on

            on ? @held_out[fd] = true : @held_out.delete(fd)
            in_set(fd, @listening) if @listening
          end
        end

        private

        # A crowded worker looks at its listen queues itself every
        # ADMISSION_INTERVAL: the kernel puts a shared listener's report in
        # the ready list of a worker that has a thread waiting in epoll_wait,
        # and a crowded worker has none, so the report may never reach it.
        def admit(now)
          @next_admission = now + ADMISSION_INTERVAL
          @gate.holding(@reactor.handler_count)
          crowd_room_again if @crowd_full
          return unless crowded?

          @listeners.each { |l| !@held_out[fd = l.io.fileno] && (acceptor = @by_fd[fd]) && let_in(acceptor) }
        end

        def crowded?
          @listening && @reactor.crowded? && @gate.crowd_welcome?
        end

        # Takes the connections waiting, for the loop to serve: up to
        # CROWD_MAX, with crowded siblings its share (Dispatcher::AcceptGate#crowd_room).
        # With its share taken, its listeners leave the epoll set until a
        # look (#admit) finds room again: their report, still ready, would
        # come back at once to a thread that takes nothing (each thread
        # that came back from a request would spin on it, and never wait
        # idle: the worker would stay crowded), and meanwhile siblings must
        # not count this worker's idle threads and leave it the crowd
        # (Dispatcher::AcceptGate#listening).
        def let_in(acceptor)
          room = @gate.crowd_room(@reactor.handler_count).clamp(0, CROWD_MAX)
          return crowd_full if room.zero?

          room.times do
            break unless @listening && can_take? && accept(acceptor, serve: false)
          end
        end

        def crowd_full
          @lock.synchronize do
            @crowd_full = true
            update
          end
        end

        # No longer crowded, or room again for a share of the crowd.
        def crowd_room_again
          return if @reactor.crowded? && @gate.crowd_room(@reactor.handler_count).zero?

          @lock.synchronize do
            @crowd_full = false
            update
          end
        end

        # A new connection whose request has not come claims a thread for a
        # moment (Dispatcher::AcceptGate).
        def accepted(handler)
          return unless @gate && handler.awaiting_first_request?

          @lock.synchronize { @gate.accepted(handler, Clock.now) }
        end

        # Our listeners go to the back of the kernel's line of workers waiting
        # on them (an exclusive wake-up goes to the first that has a thread
        # waiting), so that new connections take turns among idle workers
        # rather than all going to one while it has an idle thread.
        def to_the_back
          @lock.synchronize do
            next unless @listening

            @listeners.each do |l|
              @poller.delete(l.io.fileno)
              in_set(l.io.fileno, true)
            end
          end
        end

        # Under the lock: a listener in the epoll set, unless held out (#hold_out), or not.
        def in_set(fd, listening)
          listening && !@held_out[fd] ? @poller.add(fd, LISTENER_EVENTS) : @poller.delete(fd)
        end

        # Not once stopped (or draining): the listeners are going, or gone.
        def check_gate(now, starting = 0)
          return if @held || (@gate_open && @gate.alone?) # it stays open

          @lock.synchronize do
            open = @gate.open?(now, starting)
            next if open == @gate_open

            @gate_open = open
            update
          end
        end
      end
    end
  end
end
