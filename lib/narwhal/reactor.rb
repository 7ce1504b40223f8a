# frozen_string_literal: true

require "nio"

module Narwhal
  # The event loop of a serving process: waits on the listeners and on every
  # open connection with one selector, accepts new clients, hands readable
  # connections their bytes, and closes connections whose deadline passed.
  class Reactor
    # How often deadlines are checked; timeouts are accurate to this.
    SWEEP_INTERVAL = 0.25
    # Connections accepted per wake-up of a listener, so one busy listener
    # cannot starve established connections.
    ACCEPT_BATCH = 64

    def initialize(server)
      @server = server
      @selector = NIO::Selector.new
      @connections = {}
      @listeners = []
      @wakers = {}
      @next_sweep = 0
    end

    def add_listener(listener)
      @selector.register(listener.io, :r).value = listener
      @listeners << listener
    end

    # Calls the block in the loop whenever io is readable.
    def watch(io, &block)
      @selector.register(io, :r).value = block
    end

    def unwatch(io)
      @selector.deregister(io)
    end

    def connection_count
      @connections.size
    end

    # Runs until #stop_accepting was called and every connection is gone.
    def run
      until @listeners.empty? && @connections.empty?
        @selector.select(SWEEP_INTERVAL) { |monitor| dispatch(monitor.value) }
        now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        sweep(now) if now >= @next_sweep
      end
    end

    # Graceful stop: no new clients; idle keep-alive connections close now,
    # requests being read are finished.
    def stop_accepting
      @listeners.each { |l| @selector.deregister(l.io) }
      @listeners.clear
      @connections.each_key { |c| drop(c) if c.idle? }
    end

    def close_all
      stop_accepting
      @connections.each_key(&:close)
      @connections.clear
    end

    private

    def dispatch(target)
      case target
      when Connection then drop(target) unless target.on_readable
      when Listener then accept(target)
      else target.call
      end
    rescue StandardError => e
      # a bug must cost one connection, never the process
      @server.logger.error("internal error: #{e.class}: #{e.message}\n#{Array(e.backtrace).join("\n")}")
      drop(target) if target.is_a?(Connection)
    end

    def accept(listener)
      ACCEPT_BATCH.times do
        sock = listener.accept_nonblock
        return if sock == :wait_readable

        conn = Connection.new(sock, listener, @server)
        monitor = @selector.register(sock, :r)
        monitor.value = conn
        conn.monitor = monitor
        @connections[conn] = true
        # the request usually arrives with the connection: read it now
        dispatch(conn)
      end
    rescue Errno::ECONNABORTED, Errno::EPROTO, Errno::EINTR
      nil
    rescue Errno::EMFILE, Errno::ENFILE, Errno::ENOBUFS, Errno::ENOMEM => e
      @server.logger.error("accept failed: #{e.message}")
    end

    def drop(conn)
      conn.close
      @connections.delete(conn)
    end

    def sweep(now)
      @next_sweep = now + SWEEP_INTERVAL
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
