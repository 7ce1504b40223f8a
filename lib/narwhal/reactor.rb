# frozen_string_literal: true

module Narwhal
  # The event loop of a serving process: waits on the listeners and on every
  # open connection in one epoll set (Poller), accepts new clients, hands
  # readable connections their bytes, and closes connections whose deadline
  # passed.
  #
  # Listeners are registered with EPOLLEXCLUSIVE: of the workers waiting on
  # a shared listener, the kernel wakes one per new connection. A worker
  # busy in the app is not waiting, so it is never the one woken.
  #
  # When accept fails for want of descriptors or memory the listeners leave
  # the epoll set for a while (AcceptBackoff), else they would stay
  # readable and the loop would spin; the sweep puts them back.
  class Reactor
    # How often deadlines are checked; timeouts are accurate to this.
    SWEEP_INTERVAL = 0.25

    # What a connection holds to leave the loop (Connection#monitor).
    Registration = Struct.new(:reactor, :fd) do
      def close
        reactor.forget(fd)
      end
    end

    def initialize(server)
      @server = server
      @poller = Poller.new
      @targets = [] # fd => Listener, Connection or callable
      @ready = []
      @connections = {}
      @listeners = []
      @next_sweep = 0
      @wait = SWEEP_INTERVAL
      @backoff = AcceptBackoff.new(server.logger)
      @resume_at = nil # while accepting is paused
    end

    def add_listener(listener)
      register(listener.io.fileno, listener, exclusive: true)
      @listeners << listener
    end

    # Calls the block in the loop whenever io is readable.
    def watch(io, &block)
      register(io.fileno, block)
    end

    def unwatch(io)
      forget(io.fileno)
    end

    # Stops watching fd (before it is closed: epoll must not keep it).
    def forget(fd)
      return unless @targets[fd]

      @targets[fd] = nil
      @poller.delete(fd)
    end

    # Runs until #stop_accepting was called and every connection is gone.
    def run
      ready = @ready
      until @listeners.empty? && @connections.empty?
        count = @poller.wait(@wait, ready)
        i = 0
        while i < count
          target = @targets[ready[i]]
          dispatch(target) if target
          i += 1
        end
        now = Clock.now
        sweep(now) if now >= @next_sweep
      end
    ensure
      @poller.close
    end

    # Graceful stop: no new clients; idle keep-alive connections close now,
    # requests being read are finished.
    def stop_accepting
      @listeners.each { |l| forget(l.io.fileno) }
      @listeners.clear
      @resume_at = nil
      @connections.each_key { |c| drop(c) if c.idle? }
    end

    def close_all
      stop_accepting
      @connections.each_key(&:close)
      @connections.clear
    end

    private

    def register(fd, target, exclusive: false)
      @targets[fd] = target
      @poller.add(fd, exclusive)
    end

    def dispatch(target)
      case target
      when Connection then drop(target) unless target.on_readable
      when Listener then accept(target)
      else target.call
      end
    rescue StandardError => e
      # a bug must cost one connection, never the process
      @server.logger.error("internal error: #{e.class}: #{e.message}#{ErrorMessage.backtrace(e)}")
      drop(target) if target.is_a?(Connection)
    end

    # One connection per wake-up: its request usually came with it and is
    # served at once; the next pending connection wakes a worker again, so
    # that with several workers no one of them takes more than it serves.
    def accept(listener)
      sock = listener.accept_nonblock
      return if sock == :wait_readable

      @backoff.recovered(Clock.now) if @backoff.failing?
      conn = Connection.new(sock, listener, @server)
      fd = sock.fileno
      register(fd, conn)
      conn.monitor = Registration.new(self, fd)
      @connections[conn] = true
      dispatch(conn)
    rescue Errno::ECONNABORTED, Errno::EPROTO, Errno::EINTR
      nil
    rescue Errno::EMFILE, Errno::ENFILE, Errno::ENOBUFS, Errno::ENOMEM => e
      pause_accepting(e)
    end

    # Every listener leaves the epoll set until the pause is over: they
    # share the limit that was hit.
    def pause_accepting(error)
      now = Clock.now
      @resume_at = now + @backoff.failed(error, now)
      @listeners.each { |l| forget(l.io.fileno) }
      wake_for_resume(now)
    end

    # The loop wakes and sweeps when the pause ends, not up to a sweep later.
    def wake_for_resume(now)
      @next_sweep = @resume_at if @resume_at < @next_sweep
      @wait = [@resume_at - now, SWEEP_INTERVAL].min
    end

    def resume_accepting
      @resume_at = nil
      @wait = SWEEP_INTERVAL
      @listeners.each { |l| register(l.io.fileno, l, exclusive: true) }
    end


    def drop(conn)
      conn.close
      @connections.delete(conn)
    end

    def sweep(now)
      @next_sweep = now + SWEEP_INTERVAL
      if @resume_at
        now >= @resume_at ? resume_accepting : wake_for_resume(now)
      end
      @connections.each_key do |conn|
        if conn.closed?
          @connections.delete(conn)
        elsif conn.deadline < now
          conn.on_timeout
          @connections.delete(conn)
        end
      end
    end
  end
end
