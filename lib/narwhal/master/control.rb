# frozen_string_literal: true

require "json"
require "socket"

module Narwhal
  class Master
    # The control listener (`control_listen`): a small HTTP/1.x endpoint in
    # the master for probes, scrapers and `narwhal status`. It never calls
    # the app; it reads the scoreboard and the master's tables (Status).
    #
    #   GET /metrics   Prometheus text format (Metrics)
    #   GET /health    200 while the master runs
    #   GET /ready     200 when a worker serves and the master is not
    #                  draining, else 503 with the reason
    #   GET /status    the same data as JSON (what `narwhal status` reads)
    #
    # The same thread answers haproxy's agent-check on `agent_listen`
    # (Agent): one line per connection, written at once.
    #
    # It runs on a thread of its own in the master, one IO.select loop over
    # its sockets and their clients, so the master's loop never waits for it
    # and it never waits for one client: each has READ_DEADLINE seconds for
    # a request of at most MAX_REQUEST bytes and WRITE_DEADLINE seconds to
    # take the answer; at most MAX_CLIENTS are held, the oldest dropped
    # beyond. Every answer closes its connection.
    class Control
      autoload :Agent, "narwhal/master/control/agent"
      autoload :Exchange, "narwhal/master/control/exchange"
      autoload :Handover, "narwhal/master/control/handover"
      autoload :Metrics, "narwhal/master/control/metrics"
      autoload :Sockets, "narwhal/master/control/sockets"
      autoload :Status, "narwhal/master/control/status"
      include Exchange
      include Sockets

      MAX_REQUEST = 4096
      READ_DEADLINE = 5
      WRITE_DEADLINE = 10
      MAX_CLIENTS = 32
      ROUTES = %w[/metrics /health /ready /status].freeze

      # Its socket's options: no deferred accept (a probe's connection is
      # answered at once) and a short queue. A Unix socket is 0600: only the
      # master's user (who runs `narwhal status`) and root may ask it.
      LISTEN_OPTIONS = { backlog: 64, tcp_defer_accept: false, tries: 0, mode: 0o600 }.freeze
      RETRY_BUSY = 1.0 # seconds between attempts on an address still in use
      # At most this long, a master handing the socket to its USR2 successor
      # answers the probes it took already (Control#stop with hand_over).
      HAND_OVER_SECONDS = 1.0

      # address: control_listen's, nil for none; status: a Status (#to_h);
      # listener: the socket a USR2 predecessor passed down (Handover), or
      # nil; agent: the Agent (agent_listen), or nil.
      def initialize(address, status, logger, read_deadline: READ_DEADLINE, listener: nil, agent: nil)
        @address = address
        @read_deadline = read_deadline
        @status = status
        @logger = logger
        @listener = listener
        @agent = agent
        @inherited = !listener.nil? || agent&.inherited? || false
        @retry_bind_at = nil # an address still busy is tried again then
        @clients = {}
        @thread = nil
        @closing = false # takes no more connections; ends once its clients are answered
        @wake_r, @wake_w = IO.pipe # wakes the thread's select for that
      end

      # The bound address ("127.0.0.1:9394", a socket path), nil until bound.
      def address
        @listener&.address
      end

      # Binds (Sockets#bind_sockets), then serves on a thread; a USR2
      # predecessor that answered on the agent socket stops now.
      def start(wait_if_busy: false)
        bind_sockets(wait_if_busy: wait_if_busy, quiet: !@retry_bind_at.nil?)
        @thread = Thread.new { run }
        @thread.name = "narwhal control"
        @thread.report_on_exception = false
        @agent&.announce
        self
      end

      # Whether a socket came from a USR2 predecessor: answered on once a
      # worker serves.
      def inherited?
        @inherited
      end

      # USR2's child, before exec: the sockets go to the new master.
      def pass_on_exec
        map = @listener ? Handover.pass_on_exec(@listener) : {}
        @agent ? map.merge(@agent.pass_on_exec) : map
      end

      # The USR2 successor died: this master answers the agent again.
      def take_back
        @agent&.take_back
        @wake_w.write_nonblock(".", exception: false) unless @wake_w.closed?
      end

      def started?
        !@thread.nil?
      end

      # unlink: false keeps a Unix socket's file (a re-exec'd master
      # serves it). hand_over: a successor answers on the same socket, so
      # the probes taken already are answered first (a probe dropped then
      # would read as a failure). Once more after the first: nothing.
      def stop(unlink: true, hand_over: false)
        finish_taken if hand_over
        @thread&.kill&.join(1)
        @clients.each_key { |io| io.close unless io.closed? }
        @clients.clear
        close_sockets(unlink: unlink)
        [@wake_r, @wake_w].each(&:close)
      end

      # One request's answer: [status, headers, body]. HEAD gets no body
      # (see #respond). Public for the tests.
      def answer(method, target)
        path = target.split("?", 2).first
        return plain(404, "not found: #{ROUTES.join(' ')}\n") unless ROUTES.include?(path)
        return plain(405, "method not allowed\n", "allow" => "GET, HEAD") unless %w[GET HEAD].include?(method)

        route(path)
      end

      private

      def route(path)
        return plain(200, "ok\n") if path == "/health"

        status = @status.to_h
        case path
        when "/metrics" then [200, { "content-type" => Metrics::CONTENT_TYPE }, Metrics.render(status)]
        when "/status" then [200, { "content-type" => "application/json" }, "#{JSON.generate(status)}\n"]
        else
          reason = Status.not_ready_reason(status)
          reason ? plain(503, "not ready: #{reason}\n") : plain(200, "ready\n")
        end
      end

      def plain(code, text, headers = {})
        [code, { "content-type" => "text/plain" }.merge(headers), text]
      end

      # No more connections; the thread ends once those it has are answered
      # (HAND_OVER_SECONDS at most).
      def finish_taken
        return unless @thread&.alive?

        @closing = true
        @wake_w.write_nonblock(".", exception: false)
        @thread.join(HAND_OVER_SECONDS)
      end

      def run
        until @closing && @clients.empty?
          bind_sockets(wait_if_busy: true, quiet: true) if @retry_bind_at && Clock.now >= @retry_bind_at
          readers = @closing ? [@wake_r] : [@wake_r, *listening]
          writers = []
          @clients.each_value { |c| (c.output ? writers : readers) << c.io }
          readable, writable = IO.select(readers, writers, nil, wait_time)
          readable&.each { |io| on_readable(io) }
          writable&.each { |io| write(@clients[io]) }
          expire
        end
      rescue StandardError => e
        @logger.error("control listener stopped: #{ErrorMessage.for(e)}#{ErrorMessage.backtrace(e)}")
      end

      def on_readable(io)
        if io == @wake_r then @wake_r.read_nonblock(64, exception: false)
        elsif io == @listener&.io then accept
        elsif @clients.key?(io) then read(@clients[io])
        elsif @agent&.readers&.include?(io) then answer_agent(@agent.on_readable(io))
        end
      end

      def wait_time
        deadline = [*@clients.each_value.map(&:deadline), @retry_bind_at].compact.min
        deadline ? [deadline - Clock.now, 0].max : nil
      end

      def accept
        io = @listener.io.accept_nonblock(exception: false)
        hold(io, Clock.now + @read_deadline) unless io == :wait_readable
      end

      # haproxy's agent-check: the line at once; the connection closes once
      # it is taken. A line that cannot be made (a status that cannot be
      # read) is logged and the connection closed: haproxy changes nothing.
      def answer_agent(io)
        return unless io

        client = hold(io, Clock.now + WRITE_DEADLINE)
        client.output = @agent.reply(@status.to_h).b
        write(client)
      rescue StandardError => e
        @logger.error("agent: #{ErrorMessage.for(e)}#{ErrorMessage.backtrace(e)}")
        drop(client)
      end

      def hold(io, deadline)
        drop(@clients.each_value.min_by(&:deadline)) if @clients.size >= MAX_CLIENTS
        @clients[io] = Client.new(io, +"", nil, deadline)
      end
    end
  end
end
