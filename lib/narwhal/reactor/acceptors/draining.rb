# frozen_string_literal: true

module Narwhal
  class Reactor
    class Acceptors
      # A graceful stop with drain (no other process will take the listen
      # queue): everything waiting is taken on the calling thread, and each
      # listener is let go of once empty.
      module Draining
        # How long a draining process still takes connections once its listen
        # queue is empty, before it lets go of the listener.
        DRAIN_GRACE = 0.05

        # Graceful stop: no new connection, unless drain (no other process
        # will take them): then every connection waiting in the listen queue
        # is taken now, on the calling thread, without serving any yet (the
        # loop threads serve them, even while all of them were in the app
        # when the stop came), and the block lets go
        # of each listener (it is given it), so that the last process to hold
        # them leaves none for the kernel to reset; the loop threads then
        # serve what was taken. (Serving each before taking the next would
        # leave the listeners open for as long as that takes, and clients
        # that keep connecting would keep them open.)
        def retire(drain, let_go_of_listeners)
          return stop unless drain

          drain(let_go_of_listeners || ->(_listener) {})
        end

        private

        # On the thread that asked (it serves nothing meanwhile): the
        # listeners leave the epoll set, each is emptied (#take_all) and let
        # go of at once.
        def drain(let_go)
          @lock.synchronize { hold_locked }
          @listeners.each do |listener|
            take_all(@by_fd[listener.io.fileno])
            let_go.call(listener)
          end
        ensure
          @lock.synchronize { stop_locked }
        end

        def hold_locked
          @held = true
          update
        end

        # Until the listen queue is empty, or accepting must pause (no
        # descriptor, the connection limit with none idle to close). Then,
        # for DRAIN_GRACE, what still arrives: with TCP_DEFER_ACCEPT a client
        # whose connect succeeded is not in the queue until its request
        # arrives, and closing the listener meanwhile would reset it; the
        # deferral is turned off first, so that what connects during the
        # grace is queued at once.
        def take_all(acceptor)
          return unless acceptor

          no_deferral(acceptor.listener.io)
          until_at = Clock.now + DRAIN_GRACE
          loop do
            nil while can_take? && accept(acceptor, serve: false)
            left = until_at - Clock.now
            break unless can_take? && left.positive?

            IO.select([acceptor.listener.io], nil, nil, left)
          end
        end

        def no_deferral(io)
          io.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_DEFER_ACCEPT, 0) unless io.local_address.unix?
        rescue SystemCallError, IOError
          nil
        end
      end
    end
  end
end
