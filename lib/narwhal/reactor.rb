# frozen_string_literal: true

module Narwhal
  # The event loop of a serving process: one epoll set (Poller) over the
  # listeners, the open connections and a few pipes. It knows descriptors
  # and handlers, not HTTP.
  #
  # A handler (a connection) answers #on_readable and #on_timeout with what
  # should happen to it next: KEEP it registered, CLOSE it (the reactor
  # forgets the descriptor, then calls #close), or RELEASE it (forgotten,
  # not closed: someone else took the socket, as with rack.hijack). It also
  # has #deadline (a Clock time), #idle? (kept alive between requests) and
  # #silent? (has sent nothing yet): at the connection limit the oldest
  # idle one, else the oldest silent one, is closed to make room.
  #
  # WRITE: the handler has bytes to send that the socket would not take.
  # The reactor then waits for the descriptor to be writable, not readable,
  # and calls #on_writable, which answers the same way: WRITE (more to
  # send), KEEP (all sent: wait for reading again), CLOSE or RELEASE.
  #
  # With request threads (`threads N`, #run with a block) N threads run
  # this loop on the one epoll set, each taking one report at a time, and
  # the thread that reads a request runs it (there is no hand-off): see
  # Threads. Listeners wake one waiting worker per connection, and
  # accepting pauses and resumes: see Acceptors.
  class Reactor
    autoload :AcceptBackoff, "narwhal/reactor/accept_backoff"
    autoload :Acceptors, "narwhal/reactor/acceptors"
    autoload :Adoption, "narwhal/reactor/adoption"
    autoload :Closing, "narwhal/reactor/closing"
    autoload :Load, "narwhal/reactor/load"
    autoload :Threads, "narwhal/reactor/threads"
    autoload :Watching, "narwhal/reactor/watching"
    include Adoption
    include Closing
    include Load
    include Watching

    KEEP = Next::KEEP
    WRITE = Next::WRITE
    CLOSE = Next::CLOSE
    RELEASE = Next::RELEASE

    # How often deadlines are checked; timeouts are accurate to this.
    SWEEP_INTERVAL = 0.25

    # max_handlers: connections held at most (worker_connections); gate:
    # an Dispatcher::AcceptGate (request threads) or nil (one thread).
    # poller: the epoll set to run on (made here when nil).
    def initialize(logger, max_handlers: Float::INFINITY, gate: nil, poller: nil)
      @logger = logger
      @threaded = !gate.nil?
      @poller = poller || Poller.new(@threaded)
      # with threads each report goes to one thread, and is re-armed by it
      @handler_events = @threaded ? Poller::READ | Poller::ONESHOT : Poller::READ
      @write_events = @threaded ? Poller::WRITE | Poller::ONESHOT : Poller::WRITE
      @targets = []   # fd => handler or Watcher
      @writing = []   # fd => true while its handler waits to write, nil until in the set
      @handlers = {}.compare_by_identity # handler => fd (identity: no object id to make)
      @acceptors = Acceptors.new(self, @poller, logger, max_handlers, gate)
      @ready = []
      @next_sweep = 0
      @sweeping = Mutex.new # one thread sweeps at a time
      @on_sweep = nil
      @closing = false # close_all: no handler is kept
      @threads = nil
      @watchers = {} # with request threads: io => block
    end

    # A loop thread's duty at every sweep (the access log's gathered lines).
    def on_sweep(&block)
      @on_sweep = block
    end

    # Accepts from listener (anything with #io and #accept_nonblock); each
    # accepted socket becomes the handler that factory (or the block)
    # returns for it (#call). A Connection::Factory also accepts and serves
    # itself (#accept_served).
    def add_listener(listener, factory = nil, &block)
      @acceptors.add(listener, factory || block)
    end

    # Runs until the listeners are gone (#retire, #close_all) and every
    # handler is. With a block: `threads` loop threads, each given to the
    # block first (it sets up what the thread serves with).
    def run(threads: 1, &on_thread)
      @acceptors.start
      return serve(@ready, Poller::MAX_EVENTS) unless on_thread

      @threads = Threads.new(threads, @logger, on_thread) { serve([], 1) }
      @threads.run(self, @watchers)
    ensure
      # after an immediate stop threads still in the app finish with it
      @poller.close unless @threads&.running?
    end

    def finished?
      @acceptors.none? && @handlers.empty?
    end

    # An immediate stop: the loop threads' keeper does not wait for them.
    def closing?
      @closing
    end

    def pause_accepting
      @acceptors.hold(true)
    end

    def resume_accepting
      @acceptors.hold(false)
    end

    # One listener out of the epoll set (on) or back (Acceptors#hold_out).
    def hold_out(listener, on)
      @acceptors.hold_out(listener, on)
    end

    # Graceful stop. Handlers finish what they do; idle ones stay until
    # their deadline (a keep-alive timeout the client was told): closing one
    # now would race a request already on its way. No new connection,
    # unless drain (no other process will take them): see Acceptors#retire.
    def retire(drain: false, &let_go_of_listeners)
      @acceptors.retire(drain, let_go_of_listeners)
    end

    # Immediate stop: no new clients, every handler closed (one a thread
    # has is closed when it comes back).
    def close_all
      @closing = true
      @threads&.stop_waiting
      @acceptors.stop
      @handlers.keys.each { |h| drop_unowned(h) }
    end

    private

    # One loop thread: waits for reports (at most max at a time), runs what
    # they ask, sweeps when it is time, and lets the acceptors look again.
    def serve(ready, max)
      count = 0
      until finished?
        # with threads: a thread that served goes on to the next report
        # without giving up the GVL while there is one (Poller#wait)
        keep = @threaded && count.positive?
        count = 0 # a wait that raises leaves this thread counted as serving nowhere
        count = @poller.wait(@acceptors.wait_time(SWEEP_INTERVAL), ready, max, keep)
        i = 0
        while i < count
          fd = ready[i]
          if (target = @targets[fd])
            dispatch(target, fd)
          else
            @acceptors.ready(fd)
          end
          i += 1
        end
        now = Clock.now
        sweep(now) if now >= @next_sweep
        @acceptors.pass(now)
      end
    ensure
      # leaving while it serves (the app ended the thread, the loop is
      # done): the waiting thread must not hold reports for it
      @poller.stop_serving if @threaded && count.positive?
    end

    # Stops watching fd (before it is closed: epoll must not keep it).
    # EPERM: the number is a file's now (a released socket was closed),
    # which epoll cannot hold: nothing of ours is left to delete.
    def forget(fd)
      return unless @targets[fd]

      registered = @threaded || !@writing[fd].nil? # a reservation is the poller's too
      @targets[fd] = nil
      @writing[fd] = nil
      @poller.delete(fd) if registered
    rescue Errno::EPERM
      nil
    end

    # Runs the handler's step, then does what it answered. Also when the
    # step did not return (the app ended its thread): the connection closes.
    # With request threads, this thread is busy from here on: the accept
    # gate looks again first (Acceptors#request_starting).
    def dispatch(target, fd)
      action = CLOSE
      action = if @writing[fd] then target.on_writable
               else
                 @acceptors.request_starting if @threaded
                 target.on_readable
               end
    rescue StandardError => e
      internal_error(e) # a bug must cost one connection, never the process
    ensure
      apply(target, fd, action)
    end

    def apply(handler, fd, action)
      if (action == KEEP || action == WRITE) && !@closing
        wait_for(fd, action == WRITE)
      elsif @handlers.key?(handler)
        let_go(handler, fd)
        handler.close unless action == RELEASE
        @acceptors.room_again
      end
    end

    def register(handler, fd)
      @targets[fd] = handler
      @writing[fd] = nil # not in the set yet
      @handlers[handler] = fd
    end

    # What fd is watched for next: writable (#on_writable) or readable.
    # With threads this also re-arms it and gives up this thread's claim;
    # with one thread epoll is told only of a change (or of fd, the first
    # time: @writing[fd] is nil until then).
    def wait_for(fd, writing)
      return if !@threaded && writing == @writing[fd]

      @writing[fd] = writing
      @poller.modify(fd, writing ? @write_events : @handler_events)
    rescue Errno::ENOMEM, Errno::ENOSPC => e # its first registration
      refused(@targets[fd], fd, e)
    end

    def let_go(handler, fd)
      # a socket released by a hijacker may have been closed since, and
      # its number given to a connection accepted meanwhile
      forget(fd) if @targets[fd].equal?(handler)
      @handlers.delete(handler)
    end

    def internal_error(error)
      @logger.error("internal error: #{error.class}: #{error.message}#{ErrorMessage.backtrace(error)}")
    end
  end
end
