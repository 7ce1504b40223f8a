# frozen_string_literal: true

module Narwhal
  class Reactor
    # When and what a reactor accepts: its listeners (and the line of
    # sibling connections, Dispatcher::HandOff), in the epoll set unless
    # something holds them out (the caller, a back-off after accept(2)
    # failed for want of descriptors, the connection limit, with request
    # threads the AcceptGate or a crowd's share taken, one held out: Gating;
    # a stop, or a drain: Draining). Any loop thread may call in; the state
    # is changed under one lock, never held while a request runs. Listeners
    # are in the set with EPOLLEXCLUSIVE: the kernel wakes one worker per
    # connection of those with a thread waiting (docs/DESIGN.md).
    class Acceptors
      autoload :BackingOff, "narwhal/reactor/acceptors/backing_off"
      autoload :Draining, "narwhal/reactor/acceptors/draining"
      autoload :Gating, "narwhal/reactor/acceptors/gating"
      include BackingOff
      include Draining
      include Gating

      LISTENER_EVENTS = Poller::READ | Poller::EXCLUSIVE

      # factory: makes a socket's handler (#call); served: it also accepts (#accept_served).
      Acceptor = Struct.new(:listener, :factory, :served)

      def initialize(reactor, poller, logger, max_handlers, gate)
        @reactor = reactor
        @poller = poller
        @logger = logger
        @max_handlers = max_handlers
        @gate = gate
        @lock = Mutex.new
        @by_fd = [] # listener fd => Acceptor
        @listeners = []
        @held = false     # paused by the caller, or stopped
        @resume_at = nil  # when a back-off pause ends
        @full = false     # max_handlers reached, none idle
        @gate_open = true
        @crowd_full = false # crowded, and its share of a crowd taken (#let_in)
        @listening = false # listeners are in the epoll set (those not held out)
        @held_out = {} # listener fd => true (Gating#hold_out)
        @backoff = AcceptBackoff.new(logger)
        @next_admission = 0
      end

      def add(listener, factory)
        @lock.synchronize do
          fd = listener.io.fileno
          @by_fd[fd] = Acceptor.new(listener, factory, factory.respond_to?(:accept_served))
          @listeners << listener
          @poller.add(fd, LISTENER_EVENTS) if @listening
        end
      end

      def start
        @lock.synchronize { update }
      end

      def none?
        @listeners.empty?
      end

      def hold(on)
        @lock.synchronize do
          @held = on
          update
        end
      end

      # No more accepting, for good.
      def stop
        @lock.synchronize { stop_locked }
      end

      # A listener reported a connection (or a number no longer ours). Its
      # report is one turn for its whole listen queue, which a crowded
      # worker (Reactor#crowded?) gets once per round of the kept-alive
      # requests: let in one per round, the last of a crowd waited a round
      # for each connection ahead of it. So such a worker lets in its share
      # of what waits (Gating#let_in), unless a sibling has a thread
      # waiting (AcceptGate#crowd_welcome?). Else one, served here.
      def ready(fd)
        acceptor = @by_fd[fd] or return
        return accept(acceptor) unless crowded?

        let_in(acceptor)
      end

      # How long a loop thread may wait: less while a back-off ends or the gate looks again.
      def wait_time(default)
        wait = default
        if (resume_at = @resume_at)
          left = resume_at - Clock.now
          wait = left.positive? ? left : 0 if left < wait
        end
        recheck = @gate&.recheck_in
        recheck && recheck < wait ? recheck : wait
      end

      # After each pass of a loop thread.
      def pass(now)
        back_off_over(now) if @resume_at && now >= @resume_at
        return unless @gate

        check_gate(now)
        admit(now) if now >= @next_admission
      end

      # At every sweep.
      def sweep(_now)
        room_again
      end

      # One closed, or one became idle.
      def room_again
        return unless @full

        @lock.synchronize do
          next if @reactor.handler_count >= @max_handlers && !@reactor.any_idle?

          @full = false
          update
        end
      end

      private

      # One connection per wake-up: its request usually came with it and is
      # served at once, on this thread (unless serve is false: then the
      # loop serves it when epoll reports it); the next pending connection
      # wakes a worker again, so that no worker takes more than it serves.
      # True when a connection was taken (or tried and failed).
      def accept(acceptor, serve: true)
        # the loop serves a connection's first requests as it accepts it;
        # not when siblings must first be given the next (#to_the_back)
        if serve && acceptor.served && !@gate&.siblings?
          got = accept_served(acceptor)
          return !got.nil? unless got == Connection::Factory::UNSERVED
        end
        sock = acceptor.listener.accept_nonblock
        return false if sock == :wait_readable

        recovered if @backoff.failing?
        to_the_back if @gate&.siblings?
        handler = make_handler(acceptor, sock) or return true
        make_room
        @reactor.adopt(handler, sock.fileno, serve: serve) && serve && accepted(handler)
        true
      rescue Errno::ECONNABORTED, Errno::EPROTO, Errno::EINTR
        true
      rescue IOError
        false # let go of by a drain on another thread
      rescue Errno::EMFILE, Errno::ENFILE, Errno::ENOBUFS, Errno::ENOMEM => e
        back_off(e)
        true
      end

      # Connection::Factory#accept_served: a connection that stays is
      # adopted with what its first requests left it to do. True once one
      # was taken (served and closed, or adopted); else the factory's nil
      # (none waiting) or UNSERVED.
      def accept_served(acceptor)
        got = acceptor.factory.accept_served
        return got if got.nil? || got == Connection::Factory::UNSERVED

        recovered if @backoff.failing? # also when the loop closed what it took
        return true unless got

        handler, fd, action = got
        make_room
        @reactor.adopt_served(handler, fd, action) && accepted(handler)
        true
      rescue StandardError => e
        raise if e.is_a?(SystemCallError) || e.is_a?(IOError) # accept(2)'s, rescued by #accept

        @logger.error("internal error: #{e.class}: #{e.message}#{ErrorMessage.backtrace(e)}")
        true
      end

      # At max_handlers the oldest idle connection makes room; at the
      # limit accepting waits (#hold_if_full).
      def make_room
        count = @reactor.handler_count
        count -= 1 if count >= @max_handlers && @reactor.close_oldest_idle
        hold_if_full if count + 1 >= @max_handlers
      end

      def make_handler(acceptor, sock)
        acceptor.factory.call(sock)
      rescue StandardError => e
        @logger.error("internal error: #{e.class}: #{e.message}#{ErrorMessage.backtrace(e)}")
        sock.close
        nil
      end

      # At max_handlers with none idle to close, accepting waits.
      def hold_if_full
        return if @reactor.any_idle?

        @lock.synchronize do
          @full = true
          update
        end
      end

      def can_take?
        !@resume_at && !@full
      end

      def stop_locked
        @held = true
        update
        @by_fd.clear # (a drained listener is closed already)
        @listeners.clear
        @resume_at = nil
      end

      # Under the lock: listeners are in the epoll set unless something
      # holds them out.
      def update
        listening = !@held && @resume_at.nil? && !@full && @gate_open && !@crowd_full
        return if listening == @listening

        @listening = listening
        @listeners.each { |l| in_set(l.io.fileno, listening) }
        @gate&.listening(listening)
      end
    end
  end
end
