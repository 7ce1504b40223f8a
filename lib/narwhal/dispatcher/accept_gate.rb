# frozen_string_literal: true

module Narwhal
  module Dispatcher
    # Whether a worker with request threads should take new connections now.
    # Its loop threads ask after each pass (under the acceptors' lock), and
    # its listeners stay out of the epoll set while the answer is no: a new
    # connection then waits in the kernel's listen queue, where another
    # worker (or this one, later) takes it, and where an operator can see it.
    #
    # A busy thread waits nowhere, so a worker whose threads are all in the
    # app takes nothing anyway: its listeners may stay in the set, where a
    # connection waiting in the queue takes its turn with the kept-alive
    # requests when a thread comes back (kept-alive clients cannot keep new
    # ones out for as long as they send). The gate closes for two things the
    # kernel cannot see:
    # - claims: a connection accepted a moment ago whose request has not
    #   arrived claims an idle thread (for FRESH_GRACE at most), so that a
    #   worker does not take more connections than it has threads to serve
    #   them; unless the listen queue is QUEUE_VALVE deep: then idle
    #   connections arrive in a crowd, and holding them in the queue would
    #   leave new ones in SYN once it overflows;
    # - preference: a sibling that accepts has more free threads (idle ones
    #   less its claims; the scoreboard says), so that the kernel's wake-up
    #   goes to the idlest worker. A connection that nonetheless waits in the
    #   listen queue for PENDING_GRACE (the sibling is slow to take it) ends
    #   the deferral.
    class AcceptGate
      # How long a new connection without its first request claims a thread.
      FRESH_GRACE = 0.05
      # How often a worker with a busy thread looks at its siblings again:
      # they change without telling it.
      RECHECK = 0.005
      # A connection waiting this long is taken even if a sibling looks idler.
      PENDING_GRACE = 0.2
      # Connections waiting in a listen queue at which claims no longer hold
      # accepting back.
      QUEUE_VALVE = 16

      # threads: the worker's request threads; scoreboard and nr: its own and
      # its siblings' idle threads; listeners: IOs to look at for waiting
      # connections.
      def initialize(threads, scoreboard, nr, listeners)
        @threads = threads
        @scoreboard = scoreboard
        @nr = nr
        @worker = scoreboard.worker_slot(nr)
        @listeners = listeners
        @siblings = scoreboard.size > 1
        @listen_queue = System::ListenQueue.new
        @fresh = []          # connections accepted without a request yet
        @fresh_until = []    # and until when each claims a thread
        @busy = false        # some thread busy or claimed: siblings matter
        @pending_since = nil
      end

      # A connection was just accepted and its request has not arrived.
      def accepted(connection, now)
        @fresh << connection
        @fresh_until << (now + FRESH_GRACE)
        @worker.queued = @fresh.size # siblings weigh it against our idle threads
      end

      # starting: threads about to run a request their sub-slots do not show yet.
      def open?(now, starting = 0)
        expire_fresh(now) unless @fresh.empty?
        free = @scoreboard.idle_threads(@nr, @threads) - @fresh.size - starting
        @busy = free < @threads
        return queue_deep? if free <= 0 && !@fresh.empty?
        return true unless @busy # all idle: nobody is idler

        !defer?(free, now)
      end

      # Another worker serves now (the scoreboard has a slot for every
      # worker there may be: a worker on its own has none).
      def siblings?
        @siblings && @scoreboard.siblings_listening?(@nr)
      end

      # Nothing can close the gate: no connection claims a thread and no
      # sibling accepts that could be idler. Asked as each thread takes a report
      # without the acceptors' lock (one scoreboard read), so that a worker
      # on its own (or the only one accepting) pays nothing per report for
      # the gate. (A busy worker still looks again every RECHECK: a sibling
      # that accepts again is seen without waiting for a request.)
      def alone?
        @fresh.empty? && !(@siblings && @scoreboard.most_free_threads(@nr))
      end

      # A crowd in the listen queue may be let in here at once (Reactor#
      # crowded?): no sibling has a thread waiting to take it instead.
      def crowd_welcome?
        @scoreboard.most_waiting_threads(@nr).zero?
      end

      # Of a crowd, how many a worker holding `held` connections may let in:
      # up to as many more than the serving sibling that holds fewest as it
      # has threads, so that crowded siblings share it (join the shortest
      # queue, by a round at most) without waiting on each other; any alone.
      def crowd_room(held)
        fewest = @scoreboard.fewest_connections(@nr)
        fewest ? [fewest + @threads - held, 0].max : Reactor::Acceptors::CROWD_MAX
      end

      # This worker holds count connections now (siblings read it).
      def holding(count)
        @worker.connections = count
      end

      # When a loop thread must ask again even if nothing happens here: while
      # busy, for siblings that change without telling, and for claims that
      # expire. (Alone and with no claim, nothing changes unseen: idle
      # threads then sleep rather than wake to compete for the GVL.)
      def recheck_in
        @busy && (@siblings || !@fresh.empty?) ? RECHECK : nil
      end

      # The listeners entered or left the epoll set (this gate, the
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
        unless waiting?
          @pending_since = nil
          return false
        end
        @pending_since ||= now
        return false if now - @pending_since < PENDING_GRACE

        @pending_since = nil
        true
      end

      # A connection waits in a listen queue (a listener let go of has none).
      def waiting?
        IO.select(@listeners, nil, nil, 0)
      rescue IOError
        false
      end

      def queue_deep?
        @listen_queue.depths(@listeners).any? { |_, (depth, _)| depth && depth >= QUEUE_VALVE }
      rescue IOError
        false
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
        @worker.queued = @fresh.size
      end
    end
  end
end
