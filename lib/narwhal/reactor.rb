# frozen_string_literal: true

module Narwhal
  # The event loop of a serving process: one epoll set (Poller) over the
  # listeners, the open connections and a few pipes. It knows descriptors
  # and handlers, not HTTP.
  #
  # A handler (a connection) answers #on_readable and #on_timeout with what
  # should happen to it next: KEEP it registered, CLOSE it (the reactor
  # forgets the descriptor, then calls #close: the reactor is the one owner
  # of that decision), or RELEASE it (forgotten, not closed: someone else
  # took the socket, as with rack.hijack). It also has #deadline (a Clock
  # time) and #idle? (may be closed on a graceful stop).
  #
  # WRITE: the handler has bytes to send that the socket would not take.
  # The reactor then waits for the descriptor to be writable, not readable,
  # and calls #on_writable, which answers the same way: WRITE (more to
  # send), KEEP (all sent: wait for reading again), CLOSE or RELEASE.
  #
  # Listeners are registered with EPOLLEXCLUSIVE: of the workers waiting on
  # a shared listener, the kernel wakes one per new connection. A worker
  # busy in the app is not waiting, so it is never the one woken. Accepting
  # can be paused and resumed: on its own when accept(2) fails for want of
  # descriptors (AcceptBackoff; the listener would stay readable and the
  # loop would spin), by the caller when it has no room for more work, when
  # it holds `max_handlers` connections (the oldest idle one is closed first
  # to make room), and in a worker with request threads by its AcceptGate.
  #
  # With request threads a handler may answer PARK: an app thread has it
  # now. Handlers' descriptors are then armed ONESHOT, so a parked one
  # reports nothing until the thread gives it back with #resume (from any
  # thread: KEEP re-arms it at once; the other answers go through a mailbox
  # that this loop empties, as it alone closes).
  class Reactor
    autoload :Handoff, "narwhal/reactor/handoff"

    KEEP = :keep
    WRITE = :write
    CLOSE = :close
    RELEASE = :release
    PARK = :park

    LISTENER_EVENTS = Poller::READ | Poller::EXCLUSIVE

    # How often deadlines are checked; timeouts are accurate to this.
    SWEEP_INTERVAL = 0.25

    # A pipe whose readability only runs a block (signals, the master's pipe).
    Watcher = Struct.new(:block) do
      def on_readable
        block.call
        KEEP
      end
    end

    # A listener and the block that makes a handler for each accepted socket.
    Acceptor = Struct.new(:listener, :factory)

    # max_handlers: connections held at most (worker_connections); gate:
    # an AcceptGate (request threads) or nil (the app runs on this thread).
    def initialize(logger, max_handlers: Float::INFINITY, gate: nil)
      @logger = logger
      @poller = Poller.new
      @max_handlers = max_handlers
      @gate = gate
      # handlers are reported once per arming when threads may hold them
      @handler_events = gate ? Poller::READ | Poller::ONESHOT : Poller::READ
      @write_events = gate ? Poller::WRITE | Poller::ONESHOT : Poller::WRITE
      @full = false       # max_handlers reached
      @gate_open = true
      @targets = []   # fd => handler or Watcher
      @writing = []   # fd => true while its handler waits to write
      @acceptors = [] # listener fd => Acceptor
      @handlers = {}  # handler => fd
      @listeners = []
      @ready = []
      @next_sweep = 0
      @wait = SWEEP_INTERVAL
      @backoff = AcceptBackoff.new(logger)
      @held = false       # paused by the caller
      @resume_at = nil    # when a back-off pause ends
      @listening = false  # listeners are in the epoll set
      @handoff = nil
      @on_sweep = nil
      @retiring = nil # #retire's block, until the listen queue is drained
      @drain_left = {} # fd => connections the drain may still take (nil: no count)
      open_handoff if gate
    end

    # A duty of the loop's thread at every sweep, at least every
    # SWEEP_INTERVAL while it runs (the access log's gathered lines).
    def on_sweep(&block)
      @on_sweep = block
    end

    # Accepts from listener (anything with #io and #accept_nonblock); each
    # accepted socket becomes the handler the block returns for it.
    def add_listener(listener, &factory)
      @acceptors[listener.io.fileno] = Acceptor.new(listener, factory)
      @listeners << listener
      @poller.add(listener.io.fileno, LISTENER_EVENTS) if @listening
    end

    # Calls the block in the loop whenever io is readable.
    def watch(io, &block)
      register(io.fileno, Watcher.new(block))
    end

    def unwatch(io)
      forget(io.fileno)
    end

    # Runs until #retire drained the listen queue (or #close_all) and every
    # handler is gone.
    def run
      update_listeners
      ready = @ready
      until @listeners.empty? && @handlers.empty?
        count = @poller.wait(@gate ? gate_wait : @wait, ready)
        i = 0
        while i < count
          fd = ready[i]
          if (target = @targets[fd])
            dispatch(target, fd)
          elsif (acceptor = @acceptors[fd])
            accept(acceptor)
          end
          i += 1
        end
        now = Clock.now
        sweep(now) if now >= @next_sweep
        check_gate(now) if @gate
        drain_listen_queue if @retiring
      end
    ensure
      @poller.close
      @handoff&.close
    end

    # From an app thread: the handler it had (PARK) comes back with what
    # should happen to it now. KEEP and WRITE re-arm it here (epoll allows
    # that from any thread); CLOSE and RELEASE are done by the loop, the one
    # owner of closing.
    def resume(handler, action)
      if action == KEEP || action == WRITE
        @handoff.give_back(handler) do
          fd = @handlers[handler]
          wait_for(fd, action == WRITE) if fd
        end
      else
        @handoff.post(handler, action)
      end
    rescue IOError, SystemCallError
      @handoff.wake # the loop is closing (its poller too)
    end

    # On this loop's thread, before the handler goes to an app thread (the
    # dispatcher calls it): until #resume it is neither idle nor timed out.
    def park(handler)
      @handoff.park(handler)
    end

    # From any thread: the loop looks at its mailbox and its gate now.
    def wake
      @handoff.wake
    end

    # No more accepting until #resume_accepting (the caller is full).
    def pause_accepting
      @held = true
      update_listeners
    end

    def resume_accepting
      @held = false
      update_listeners
    end

    # Graceful stop. Handlers finish what they do; idle ones stay until
    # their deadline (a keep-alive timeout the client was told): closing one
    # now would race a request already on its way. No new connection,
    # unless drain (no other process will take them): then those waiting in
    # the listen queue are taken as when serving (only with room for them)
    # until a look finds none, and the block lets go of the listeners, so
    # that the last process to hold them leaves none for the kernel to reset.
    # The drain takes at most what each queue held when it began: clients
    # that keep connecting would otherwise keep it from ever ending.
    def retire(drain: false, &let_go_of_listeners)
      return stop_accepting unless drain

      @retiring = let_go_of_listeners || -> {}
      depths = ListenQueue.new.depths(@listeners.map(&:io))
      # nil where the kernel does not say: until a look finds none
      @drain_left = @listeners.to_h { |l| [l.io.fileno, depths[l.io]&.first] }
    end

    # Immediate stop: no new clients, every handler closed.
    def close_all
      stop_accepting
      @handlers.each_key { |h| drop(h) }
    end

    private

    def stop_accepting
      pause_accepting
      @listeners.each { |l| @acceptors[l.io.fileno] = nil }
      @listeners.clear
      @resume_at = nil
    end

    # While retiring, on each pass: with room to serve (or nothing left to
    # do), one connection from each listener that has one waiting; when
    # none has, the listeners go.
    def drain_listen_queue
      return unless @listening || @handlers.empty?

      took = false
      @listeners.each { |l| took = true if drain_one(l.io.fileno) }
      return if took

      stop_accepting
      @retiring.call
      @retiring = nil
    end

    # One connection from the listener's queue, while what it held when the
    # drain began is not all taken; true when one was.
    def drain_one(fd)
      left = @drain_left[fd]
      return false if left&.<=(0) || !(acceptor = @acceptors[fd]) || !accept(acceptor)

      @drain_left[fd] = left - 1 if left
      true
    end

    # Listeners are in the epoll set unless the caller, a back-off, the
    # connection limit or the gate holds them out.
    def update_listeners
      listening = !@held && @resume_at.nil? && !@full && @gate_open
      return if listening == @listening

      @listening = listening
      @listeners.each { |l| listening ? @poller.add(l.io.fileno, LISTENER_EVENTS) : @poller.delete(l.io.fileno) }
      @gate&.listening(listening)
    end

    def register(fd, target)
      @targets[fd] = target
      @writing[fd] = nil # the number may have been a released socket's
      @poller.add(fd, target.is_a?(Watcher) ? Poller::READ : @handler_events)
    end

    # Stops watching fd (before it is closed: epoll must not keep it).
    # EPERM: the number is a file's now (a released socket was closed),
    # which epoll cannot hold: nothing of ours is left to delete.
    def forget(fd)
      return unless @targets[fd]

      @targets[fd] = nil
      @writing[fd] = nil
      @poller.delete(fd)
    rescue Errno::EPERM
      nil
    end

    def dispatch(target, fd)
      if @writing[fd]
        action = target.on_writable
        return if action == WRITE && !@gate # level-triggered: still watched
      else
        action = target.on_readable
        return if action == KEEP && (!@gate || !@handlers.key?(target)) # watchers stay armed
      end
      apply(target, fd, action)
    rescue StandardError => e
      # a bug must cost one connection, never the process
      internal_error(e)
      drop(target) if @handlers.key?(target)
    end

    def apply(handler, fd, action)
      return if action == PARK

      if action == KEEP || action == WRITE
        writing = action == WRITE
        # ONESHOT: armed again after every report; else only on a change
        wait_for(fd, writing) if @gate || writing != (@writing[fd] || false)
        return
      end
      if @handoff
        @handoff.exclusively(handler) { let_go(handler, fd) }
      else
        let_go(handler, fd)
      end
      handler.close if action == CLOSE
      room_again if @full
    end

    # Switches what fd is watched for: writable (#on_writable) or readable;
    # also re-arms a ONESHOT one. From an app thread too (#resume): epoll
    # allows it, and the loop reads @writing[fd] only for a reported fd.
    def wait_for(fd, writing)
      @writing[fd] = writing
      @poller.modify(fd, writing ? @write_events : @handler_events)
    end

    def drop(handler)
      apply(handler, @handlers[handler], CLOSE)
    end

    # One connection per wake-up: its request usually came with it and is
    # served at once; the next pending connection wakes a worker again, so
    # that with several workers no one of them takes more than it serves.
    # True when a connection was taken (or tried and failed).
    def accept(acceptor)
      sock = acceptor.listener.accept_nonblock
      return false if sock == :wait_readable

      @backoff.recovered(Clock.now) if @backoff.failing?
      handler = make_handler(acceptor, sock) or return true
      make_room if @handlers.size >= @max_handlers
      fd = sock.fileno
      return true unless watched(handler, fd)

      @handlers[handler] = fd
      hold_if_full if @handlers.size >= @max_handlers
      if @gate
        # its bytes are read when epoll reports them: reading here would
        # leave the ONESHOT descriptor armed while an app thread has it
        @gate.accepted(handler)
      else
        dispatch(handler, fd)
      end
      true
    rescue Errno::ECONNABORTED, Errno::EPROTO, Errno::EINTR
      true
    rescue Errno::EMFILE, Errno::ENFILE, Errno::ENOBUFS, Errno::ENOMEM => e
      back_off(e)
      true
    end

    # epoll may refuse a new socket (ENOMEM; ENOSPC past the user's
    # fs.epoll.max_user_watches): its handler is closed, which closes the
    # socket, and accepting pauses as when accept(2) fails for want of
    # resources. False then.
    def watched(handler, fd)
      register(fd, handler)
      true
    rescue Errno::ENOMEM, Errno::ENOSPC => e
      @targets[fd] = nil
      handler.close
      back_off(e)
      false
    end

    def make_handler(acceptor, sock)
      acceptor.factory.call(sock)
    rescue StandardError => e
      internal_error(e)
      sock.close
      nil
    end

    # Every listener leaves the epoll set until the pause is over: they
    # share the limit that was hit.
    def back_off(error)
      now = Clock.now
      @resume_at = now + @backoff.failed(error, now)
      update_listeners
      wake_for_resume(now)
    end

    # The loop wakes and sweeps when the pause ends, not up to a sweep later.
    def wake_for_resume(now)
      @next_sweep = @resume_at if @resume_at < @next_sweep
      @wait = [@resume_at - now, SWEEP_INTERVAL].min
    end

    def back_off_over(now)
      return wake_for_resume(now) if now < @resume_at

      @resume_at = nil
      @wait = SWEEP_INTERVAL
      update_listeners
    end

    # At max_handlers a new connection needs room: the oldest idle
    # kept-alive connection is closed for it.
    def make_room
      oldest_idle = @handlers.each_key.find { |h| idle?(h) }
      drop(oldest_idle) if oldest_idle
    end

    # At max_handlers with none idle to close, accepting waits.
    def hold_if_full
      return if @handlers.each_key.any? { |h| idle?(h) }

      @full = true
      update_listeners
    end

    # One closed, or one became idle (checked on each sweep).
    def room_again
      return if @handlers.size >= @max_handlers && @handlers.each_key.none? { |h| idle?(h) }

      @full = false
      update_listeners
    end

    def check_gate(now)
      open = @gate.open?(now)
      return if open == @gate_open

      @gate_open = open
      update_listeners
    end

    # The gate may want to look again sooner than the next sweep.
    def gate_wait
      recheck = @gate.recheck_in
      recheck && recheck < @wait ? recheck : @wait
    end

    def open_handoff
      @handoff = Handoff.new
      watch(@handoff.reader) { read_mail }
    end

    # Idle, and not with an app thread (which may be finishing its turn).
    def idle?(handler)
      handler.idle? && !@handoff&.parked?(handler)
    end

    def let_go(handler, fd)
      # a socket released from an app thread may have been closed since,
      # and its number given to a connection accepted meanwhile
      forget(fd) if @targets[fd].equal?(handler)
      @handlers.delete(handler)
    end

    # Also for a handler the loop already dropped (close_all): then nothing.
    # One entry failing must not leave the others held forever.
    def read_mail
      @handoff.take.each do |handler, action|
        fd = @handlers[handler] or next
        apply(handler, fd, action)
      rescue StandardError => e
        internal_error(e)
        drop(handler) if @handlers.key?(handler)
      end
    end

    def sweep(now)
      @next_sweep = now + SWEEP_INTERVAL
      @on_sweep&.call
      room_again if @full
      back_off_over(now) if @resume_at
      @handlers.each do |handler, fd|
        next unless handler.deadline < now
        next if @handoff&.parked?(handler) # its thread decides

        apply(handler, fd, timed_out(handler))
      end
    end

    def timed_out(handler)
      handler.on_timeout
    rescue StandardError => e
      internal_error(e)
      CLOSE
    end

    def internal_error(error)
      @logger.error("internal error: #{error.class}: #{error.message}#{ErrorMessage.backtrace(error)}")
    end
  end
end
