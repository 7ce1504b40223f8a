# frozen_string_literal: true

module Narwhal
  class Reactor
    # When and what a reactor accepts: its listeners, which are in the
    # epoll set unless something holds them out (the caller, a back-off
    # after accept(2) failed for want of descriptors, the connection limit,
    # with request threads the Dispatcher::AcceptGate or a crowd's share taken, a
    # stop), and the drain of the
    # listen queue on a graceful stop. Any loop thread may call in; the
    # state is changed under one lock, never held while a request runs.
    class Acceptors
      LISTENER_EVENTS = Poller::READ | Poller::EXCLUSIVE
      # How long a draining process still takes connections once its listen
      # queue is empty, before it lets go of the listener.
      DRAIN_GRACE = 0.05
      # Connections a crowded worker lets in at most at one turn.
      CROWD_MAX = 64
      # How often a crowded worker looks at its listen queues (#admit).
      ADMISSION_INTERVAL = 0.001

      # A listener and what makes a handler for each accepted socket (#call);
      # served: it can also accept and serve itself (Connection::Factory#accept_served).
      Acceptor = Struct.new(:listener, :factory, :served)

      def initialize(reactor, poller, logger, max_handlers, gate)
        @reactor = reactor
        @poller = poller
        @logger = logger
        @max_handlers = max_handlers
        @gate = gate
        @lock = Mutex.new
        @by_fd = []       # listener fd => Acceptor
        @listeners = []
        @held = false     # paused by the caller, or stopped
        @resume_at = nil  # when a back-off pause ends
        @full = false     # max_handlers reached, none idle
        @gate_open = true
        @crowd_full = false # crowded, and its share of a crowd taken (#let_in)
        @listening = false # listeners are in the epoll set
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
      # for each connection ahead of it. So such a worker lets in what
      # waits (up to CROWD_MAX; with crowded siblings, its share:
      # Dispatcher::AcceptGate#crowd_room) and leaves each connection to take its own
      # turn behind the requests that came before it. Not
      # while a sibling has a thread waiting (Dispatcher::AcceptGate#crowd_welcome?).
      # Else one, served here. (A crowded worker also looks at the queues
      # itself: #admit.)
      def ready(fd)
        acceptor = @by_fd[fd] or return
        return accept(acceptor) unless crowded?

        let_in(acceptor)
      end

      # How long a loop thread may wait: less than default while a
      # back-off ends sooner or the gate wants to look again.
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

      # A loop thread is about to run a request it read: the gate looks
      # again with that thread busy (its scoreboard sub-slot does not say
      # so yet), so that a sibling with more idle threads gets the next
      # connection.
      def request_starting
        check_gate(Clock.now, 1) unless @gate_open && @gate.alone?
      end

      # At every sweep.
      def sweep(_now)
        room_again
      end

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

      # accept(2) failed for want of a shared resource: every listener
      # leaves the epoll set until the pause is over.
      def back_off(error)
        @lock.synchronize do
          now = Clock.now
          @resume_at = now + @backoff.failed(error, now)
          update
        end
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

      # A crowded worker looks at its listen queues itself every
      # ADMISSION_INTERVAL: the kernel puts a shared listener's report in
      # the ready list of a worker that has a thread waiting in epoll_wait,
      # and a crowded worker has none, so the report may never reach it.
      def admit(now)
        @next_admission = now + ADMISSION_INTERVAL
        @gate.holding(@reactor.handler_count)
        crowd_room_again if @crowd_full
        return unless crowded?

        @listeners.each { |l| (acceptor = @by_fd[l.io.fileno]) && let_in(acceptor) }
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

      def recovered
        @lock.synchronize { @backoff.recovered(Clock.now) if @backoff.failing? }
      end

      # At max_handlers with none idle to close, accepting waits.
      def hold_if_full
        return if @reactor.any_idle?

        @lock.synchronize do
          @full = true
          update
        end
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
            @poller.add(l.io.fileno, LISTENER_EVENTS)
          end
        end
      end

      def back_off_over(now)
        @lock.synchronize do
          next unless @resume_at && now >= @resume_at

          @resume_at = nil
          update
        end
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

      def can_take?
        !@resume_at && !@full
      end

      def no_deferral(io)
        io.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_DEFER_ACCEPT, 0) unless io.local_address.unix?
      rescue SystemCallError, IOError
        nil
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
        @listeners.each { |l| listening ? @poller.add(l.io.fileno, LISTENER_EVENTS) : @poller.delete(l.io.fileno) }
        @gate&.listening(listening)
      end
    end
  end
end
