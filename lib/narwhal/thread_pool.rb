# frozen_string_literal: true

module Narwhal
  # The dispatcher of a worker with request threads (`threads N`, N > 1):
  # N app threads, each with its own Responder (and scoreboard sub-slot),
  # take complete requests from one FIFO per worker, in the order they
  # became ready, whether they came from a new connection, a kept-alive
  # one or a pipeline. The reactor keeps reading on the worker's main
  # thread; it never runs the app.
  #
  # After a response the thread finishes the connection's turn itself:
  # a pipelined request already buffered goes to the back of the FIFO (so
  # it continues at once only when nothing else waits), and the connection
  # goes back to the reactor (Reactor#resume).
  #
  # Fairness at capacity: every answered request lets one connection that
  # waits in the listen queue in (AcceptGate), to the back of the FIFO, so
  # kept-alive clients cannot keep new ones out for as long as they send.
  #
  # Shedding: when a thread takes a request while others have waited more
  # than SHED_AFTER behind it and a sibling worker has an idle thread, that
  # response says Connection: close, so the client's next request
  # reconnects and the kernel gives it to a worker that can serve it now.
  # With one worker, or every worker full, nothing is shed: that would only
  # cost reconnects.
  class ThreadPool
    QUEUED = :queued
    # A request that waited less than this is not a backlog worth a
    # reconnect: hello at 2 x 5 threads shed one response in five without it.
    SHED_AFTER = 0.01

    attr_reader :size

    # responders: one per thread; scoreboard/nr: where the siblings' idle
    # threads are read for shedding.
    def initialize(responders, scoreboard, nr, logger)
      @responders = responders
      @size = responders.size
      @scoreboard = scoreboard
      @nr = nr
      @queued = scoreboard.worker_slot(nr) # where the queue's length is published
      @logger = logger
      @lock = Mutex.new
      @work = ConditionVariable.new
      @fifo = []
      @since = [] # when each queued request came in
      @idle = 0
      @stopping = false
      @room = false
      @threads = []
      @reactor = nil
    end

    # on_thread: called in each new thread with its Responder's slot (a
    # watchdog registers it).
    def start(reactor, &on_thread)
      @reactor = reactor
      @on_thread = on_thread
      @threads = @responders.each_index.map { |i| start_thread(i) }
    end

    # The connection's request is complete (on the reactor's thread, or on
    # an app thread handing on a pipelined request).
    def dispatch(_request, connection)
      @reactor.park(connection) # before any thread can have it
      @lock.synchronize do
        if connection.first_in_line
          connection.first_in_line = false
          @fifo.unshift(connection)
          @since.unshift(Clock.now)
        else
          @fifo << connection
          @since << Clock.now
        end
        @queued.queued = @fifo.size # siblings weigh it against our idle threads
        @work.signal
      end
      QUEUED
    end

    # Idle threads that no queued request has claimed (may be negative).
    def unclaimed
      @lock.synchronize { @idle - @fifo.size }
    end

    # Whether a connection waiting to be accepted may come in although no
    # thread is free: a request was answered since the last one did (see
    # #grant_room).
    def room?
      @lock.synchronize { @room }
    end

    # A connection came in on that room.
    def take_room
      @lock.synchronize { @room = false }
    end

    # Waits for the threads once the queue is empty (graceful), or not at
    # all (wait: false, the process is about to exit).
    def stop(wait: true)
      @lock.synchronize do
        @stopping = true
        @work.broadcast
      end
      @threads.each(&:join) if wait
    end

    private

    def start_thread(i)
      Thread.new do
        Thread.current.name = "narwhal request #{i}"
        responder = @responders[i]
        @on_thread&.call(Thread.current, responder)
        done = false
        work(responder)
        done = true
      ensure
        replace(i) unless done
      end
    end

    # The app ended its thread (Thread#exit or #kill: no rescue runs, only
    # ensure blocks): another takes its place, or the worker would serve
    # with one thread fewer for the rest of its life.
    def replace(i)
      @lock.synchronize do
        return if @stopping

        @logger.error("request thread #{i} was ended by the app; starting another")
        @threads[i] = start_thread(i)
      end
    end

    def work(responder)
      connection = take(false)
      while connection
        serve(responder, connection)
        connection = take(true)
      end
    end

    # The next connection, or nil when stopping with nothing left.
    # finished: the thread just answered a request.
    def take(finished)
      connection = nil
      others_wait = false
      @lock.synchronize do
        @idle += 1
        free = @idle - @fifo.size
        # the reactor may be holding accepts for want of a thread: no more
        @reactor.wake if free == 1
        grant_room if finished && free <= 0
        @work.wait(@lock) while @fifo.empty? && !@stopping
        @idle -= 1
        connection = @fifo.shift
        @since.shift
        @queued.queued = @fifo.size
        # the next in line has waited long enough to call it a backlog
        others_wait = !@fifo.empty? && Clock.now - @since.first > SHED_AFTER
      end
      connection&.request&.close_connection if others_wait && shed?
      connection
    end

    # Under the lock: a request was answered and the queue still holds more
    # than the threads can take. Kept-alive clients that keep sending would
    # hold the threads forever while new connections wait in the listen
    # queue (the keep-alive monopoly of Puma's CVE-2019-16770): each answer
    # lets one waiting connection in, behind the requests already queued.
    def grant_room
      return if @room

      @room = true
      @reactor.wake
    end

    def shed?
      (@scoreboard.most_free_threads(@nr) || 0).positive?
    end

    def serve(responder, connection)
      action = Reactor::CLOSE
      outcome = responder.respond(connection.request)
      action = connection.after_response(outcome)
      action = connection.continue if action == Reactor::KEEP
    rescue Exception => e # rubocop:disable Lint/RescueException
      # the thread must outlive anything a request raised past the responder
      @logger.error("internal error: #{e.class}: #{e.message}#{ErrorMessage.backtrace(e)}")
      action = Reactor::CLOSE
    ensure
      # also when the app ended the thread: the connection closes
      @reactor.resume(connection, action) unless action == Reactor::PARK
    end
  end
end
