# frozen_string_literal: true

module Narwhal
  # Whether a worker with request threads should take a new connection now.
  # The reactor asks on every pass of its loop and keeps its listeners out
  # of the epoll set while the answer is no: the connection then waits in
  # the kernel's listen queue, where another worker (or this one, later)
  # takes it, and where an operator can see it.
  #
  # Yes needs all of:
  # - capacity: an idle thread that no ready request has claimed (queued
  #   requests and connections accepted a moment ago whose request has not
  #   arrived yet both claim one; the latter for FRESH_GRACE at most), or,
  #   when none is, room an answered request left (ThreadPool#room?) and no
  #   sibling with an idle thread: kept-alive clients cannot keep new ones
  #   waiting in the listen queue for as long as they send;
  # - preference: no accepting sibling (one whose listeners are in its
  #   epoll set: #listening) has more free threads, idle ones less the
  #   requests waiting for one (the scoreboard says; at capacity, the
  #   sibling with the shorter queue takes the connection),
  #   so that the kernel's wake-up goes to the idlest worker. A connection
  #   that nonetheless waits in the listen queue for PENDING_GRACE (the
  #   sibling is slow to take it) ends the deferral.
  class AcceptGate
    # How long a new connection without its first request claims a thread.
    FRESH_GRACE = 0.05
    # How often a worker with a busy thread looks at its siblings again:
    # they change without telling it.
    RECHECK = 0.005
    # A connection waiting this long is taken even if a sibling looks idler.
    PENDING_GRACE = 0.2

    # pool: the ThreadPool (#unclaimed); scoreboard and nr: this worker's
    # siblings' idle threads; listeners: IOs to look at for waiting
    # connections while deferring.
    def initialize(pool, scoreboard, nr, listeners)
      @pool = pool
      @threads = pool.size
      @scoreboard = scoreboard
      @nr = nr
      @worker = scoreboard.worker_slot(nr)
      @listeners = listeners
      @fresh = []          # connections accepted without a request yet
      @fresh_until = []    # and until when each claims a thread
      @busy = false        # some thread busy or claimed: siblings matter
      @pending_since = nil
    end

    # A connection was just accepted (and its first read done).
    def accepted(connection)
      if @pool.unclaimed - @fresh.size <= 0
        @pool.take_room
        # it waited in the listen queue while the queued requests came in:
        # its first request goes before them
        connection.first_in_line = true
      end
      return unless connection.awaiting_first_request?

      @fresh << connection
      @fresh_until << (Clock.now + FRESH_GRACE)
    end

    def open?(now)
      expire_fresh(now) unless @fresh.empty?
      free = @pool.unclaimed - @fresh.size
      @busy = free < @threads
      # at capacity a waiting connection may come in on the room an
      # answered request left, unless a sibling has less waiting
      return false if free <= 0 && !@pool.room?
      return true unless @busy # all idle: nobody is idler

      !defer?(free, now)
    end

    # When the reactor must ask again even if nothing happens here.
    def recheck_in
      @busy ? RECHECK : nil
    end

    # The reactor's listeners entered or left its epoll set (this gate, the
    # connection limit, a back-off, a stop): siblings count this worker's
    # idle threads only while it can take a connection, or they would
    # leave it connections that wait for PENDING_GRACE.
    def listening(on)
      @worker.accepting = on ? @threads : 0
    end

    private

    def defer?(free, now)
      best = @scoreboard.most_free_threads(@nr)
      if best.nil? || best <= free
        @pending_since = nil
        return false
      end
      !waited_too_long?(now)
    end

    # True (stop deferring) once a connection waited PENDING_GRACE.
    def waited_too_long?(now)
      unless IO.select(@listeners, nil, nil, 0)
        @pending_since = nil
        return false
      end
      @pending_since ||= now
      return false if now - @pending_since < PENDING_GRACE

      @pending_since = nil
      true
    end

    def expire_fresh(now)
      i = 0
      while i < @fresh.size
        if @fresh_until[i] <= now || !@fresh[i].awaiting_first_request?
          @fresh.delete_at(i)
          @fresh_until.delete_at(i)
        else
          i += 1
        end
      end
    end
  end
end
