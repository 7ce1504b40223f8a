# frozen_string_literal: true

module Narwhal
  # What one serving process runs: it wires the reactor (Reactor) over the
  # listeners, the reading side of each accepted connection (Connection,
  # Request), the dispatcher and the responders (Responder) around the app,
  # and handles the shutdown signals (QUIT graceful, INT/TERM immediate,
  # USR1 reopen logs).
  #
  # With `threads 1` the app runs on the reactor's own thread
  # (Dispatcher::Inline): no other Ruby thread. With more, N threads run
  # the reactor's loop and each runs the requests it reads
  # (Dispatcher::Threaded); an Dispatcher::AcceptGate decides when to accept.
  #
  # A worker runs one of these after the master forks it. A program may
  # also run one on its own (standalone: no master, no workers; it binds or
  # inherits its listeners itself and gives back the signal handlers it
  # found when it returns).
  class Server
    Limits = Struct.new(:body_buffer_size, :max_body_size, :max_request_line, :max_header_size,
                        :max_header_fields, :keepalive_timeout, :keepalive_requests, :client_header_timeout,
                        :client_body_timeout, :write_timeout, keyword_init: true)

    SIGNALS = %w[QUIT INT TERM USR1].freeze
    # Queued with the signals by an app thread whose request soft_timeout
    # interrupted: the reactor's thread retires the worker.
    RETIRE = :retire

    # listeners: already bound Listener objects (a worker's), or nil to bind
    # the configured addresses. scoreboard/slot: where request start times
    # go for the master's timeout; master_pipe: readable at EOF when the
    # master is gone; let_go_pipe: at EOF once the master let go of the
    # listeners for good (its workers then serve the listen queue first).
    # retire: asks the master for a replacement (true when it was told).
    def initialize(app, config, listeners: nil, scoreboard: nil, slot: 0, master_pipe: nil, let_go_pipe: nil,
                   ready: nil, retire: nil)
      @app = app
      @config = config
      @logger = config.logger
      @limits = Limits.new(
        body_buffer_size: config[:client_body_buffer_size], max_body_size: config[:client_max_body_size],
        max_request_line: config[:max_request_line], max_header_size: config[:max_header_size],
        max_header_fields: config[:max_header_fields], keepalive_timeout: config[:keepalive_timeout],
        keepalive_requests: config[:keepalive_requests], client_header_timeout: config[:client_header_timeout],
        client_body_timeout: config[:client_body_timeout], write_timeout: config[:write_timeout]
      ).freeze
      @standalone = listeners.nil?
      @listeners = listeners || []
      @threads = config[:threads]
      scoreboard ||= Scoreboard.new(1, threads: @threads)
      @threads = scoreboard.threads if @threads > scoreboard.threads
      @scoreboard = scoreboard
      @slot = slot
      @counters = scoreboard.worker_slot(slot)
      # one per process: the bound on what its connections spool together
      @spool_budget = SocketWriter::SpoolBudget.from_config(config)
      @soft_timeout = Responder::SoftTimeout.new(config[:soft_timeout], @logger) if config[:soft_timeout]
      path, format = config[:access_log]
      @access_log = path && AccessLog.open(path, format, @logger)
      @context = Connection::Context.new(@limits, dispatcher, @logger, @counters, false, @access_log)
      @master_pipe = master_pipe
      @let_go_pipe = let_go_pipe
      @ready = ready
      @retire = retire
      @retire_asked = false
      @stopping = false
      @let_go = false # a drain let go of the listeners
      @signals = nil # System::SignalQueue, while running
    end

    # Binds the configured addresses, or takes those a parent passed down
    # (Listener::Set); raises with nothing left bound on failure.
    def bind
      set = Listener::Set.new(@logger).open(@config[:listeners], default: @config[:default_listen])
      @listeners.concat(set.to_a)
      Listener::Banner.how_to_stop(@logger)
    end

    def run
      bind if @standalone && @listeners.empty?
      gate = threaded? ? Dispatcher::AcceptGate.new(@threads, @scoreboard, @slot, @listeners.map(&:io)) : nil
      cap = Configurator::ConnectionCap.new(@config[:worker_connections]).limit
      @reactor = Reactor.new(@logger, max_handlers: cap, gate: gate)
      @dispatcher.reactor = @reactor if threaded?
      @listeners.each { |l| accept_from(l) }
      install_signals
      @reactor.watch(@master_pipe) { master_gone } if @master_pipe
      @reactor.on_sweep { on_sweep }
      Dispatcher::ForkGuard.arm(@threads) if threaded?
      @soft_timeout&.start
      @counters.accepting = @threads # siblings count this many sub-slots as threads
      @reactor.publish_waiting(@counters) if threaded? # siblings see its idle threads
      @ready ? @ready.call : @logger.info("narwhal #{VERSION} serving pid=#{Process.pid}")
      threaded? ? @reactor.run(threads: @threads) { |i| start_thread(i) } : @reactor.run
    ensure
      @counters.accepting = false
      Dispatcher::ForkGuard.disarm
      @soft_timeout&.stop
      @listeners.each(&:close) if @standalone
      @standalone ? @access_log&.close : @access_log&.flush
      restore_signals
    end

    private

    def threaded?
      @threads > 1
    end

    # Inline with one thread; else each loop thread gets its responder
    # when it starts (#start_thread).
    def dispatcher
      return Dispatcher::Inline.new(responder_for(Thread.current, @scoreboard.thread_slot(@slot, 0))) unless threaded?

      @dispatcher = Dispatcher::Threaded.new(@scoreboard, @slot)
    end

    # In loop thread i (also one started again after the app ended the
    # one before): its responder, watched by soft_timeout when on.
    def start_thread(i)
      @dispatcher.serve_here(responder_for(Thread.current, @scoreboard.thread_slot(@slot, i)))
    end

    # The Responder of one app thread, given its scoreboard thread slot;
    # with soft_timeout on, the watchdog watches the thread. Request
    # threads: one call per thread, each with its own slot.
    def responder_for(thread, thread_slot)
      access_log = @access_log&.line_writer
      keep_alive = ResponseWriter.keep_alive_line(@limits.keepalive_timeout)
      unless @soft_timeout
        return Responder.new(@app, @logger, thread_slot, @counters, access_log: access_log, keep_alive: keep_alive)
      end

      Responder::Watched.new(@app, @logger, thread_slot, @counters,
                           soft_timeout: @soft_timeout.watch(thread, thread_slot),
                           on_timeout: method(:request_interrupted), access_log: access_log, keep_alive: keep_alive)
    end

    # On the app thread, after soft_timeout interrupted its request: the
    # app's state may be broken, so the worker retires (the master starts a
    # fresh one) unless told to keep it, or there is no master. The stop
    # goes through the signal queue's self-pipe so that the reactor's own
    # thread does it, between two events: an app thread must not touch
    # the reactor, and even on the reactor's thread this runs inside a
    # connection's callback.
    def request_interrupted
      return if @config[:soft_timeout_keep_worker] || @standalone

      @signals&.push(RETIRE)
    end

    # Each connection accepted on listener gets its reading side and its
    # Request, whose env starts from the listener's defaults.
    def accept_from(listener)
      template = base_env.merge(listener.env_defaults).freeze
      factory = Connection::Factory.new(listener, template, @context, @counters,
                                        budget: @spool_budget, early_hints: @config[:early_hints],
                                        threaded: threaded?, counting: !@access_log.nil?)
      @reactor.add_listener(listener, factory)
    end

    def base_env
      {
        "rack.version" => rack_version,
        "rack.errors" => $stderr,
        "rack.input" => Request::NullInput::INSTANCE,
        "rack.multithread" => @threads > 1,
        "rack.multiprocess" => @config[:worker_processes].to_i > 1,
        "rack.run_once" => false,
        "rack.url_scheme" => "http",
        "rack.hijack?" => true,
        "SCRIPT_NAME" => "",
        "SERVER_SOFTWARE" => "Narwhal #{VERSION}"
      }
    end

    def rack_version
      defined?(::Rack::VERSION) && ::Rack::VERSION.is_a?(Array) ? ::Rack::VERSION : [1, 6]
    end

    # Queued for the reactor's loop, which a self-pipe wakes.
    def install_signals
      @signals = System::SignalQueue.new
      @reactor.watch(@signals.reader) { handle_signals }
      @signals.queue(*SIGNALS)
      # INT/TERM stop at once, even inside a request (as Unicorn's workers);
      # the handler restored is still the one from before the queue's
      @signals.handle("INT", "TERM") { quick_exit } unless @standalone
      # Past a file size limit (ulimit -f) the kernel's SIGXFSZ would kill
      # the process; with a handler the write fails with EFBIG and the
      # request gets 507. A handler, not IGNORE: programs the app runs get
      # the default back at exec.
      @signals.handle("XFSZ") {}
    end

    def restore_signals
      @signals&.restore
    end

    def handle_signals
      @signals.clear_wakeups
      while (sig = @signals.pop)
        case sig
        when "USR1"
          @access_log&.flush # the lines so far go to the file being rotated
          System::LogReopener.reopen_logs(@config, @logger)
        when "QUIT" then graceful_stop("QUIT received: finishing requests in progress")
        when RETIRE then retire
        else
          @context.stopping = true
          @logger.info("#{sig} received: exiting now")
          @reactor.close_all
        end
      end
    end

    # After a soft timeout: the master forks a replacement and sends QUIT
    # once it serves (Master::Recycler), so that the port never lacks a
    # process that accepts. The master could not be told: stop accepting.
    def retire
      return if @retire_asked

      @retire_asked = true
      if @retire&.call
        @logger.info("retiring after a soft timeout: serving on until a replacement is ready")
      else
        graceful_stop("retiring after a soft timeout: finishing requests in progress, then exiting to be replaced")
      end
    end

    def quick_exit
      @access_log&.flush_at_exit
      exit!(0)
    end

    # drain: serve the listen queue first, when no other process will.
    # Kept-alive clients are then told to close only once no process can
    # take their reconnect into a queue it is about to drop (ours and our
    # siblings' listeners are all let go of): until then responses keep
    # them, and once they are gone a reconnect is refused and loses nothing.
    def graceful_stop(message, drain: last_to_listen?)
      return if @stopping # the master repeats QUIT until we are gone

      @stopping = true
      @counters.accepting = false # siblings stop leaving connections to us
      @counters.stopping! # nor count on us to share a crowd
      @logger.info(message)
      return stop_keeping_alive unless drain && !@listeners.empty?

      left = @listeners.size
      @reactor.retire(drain: true) do |listener|
        # a worker's listeners stay the master's (its socket files too)
        listener.close(unlink: @standalone)
        let_go if (left -= 1).zero?
      end
    end

    def let_go
      @counters.let_go!
      @let_go = true
      @logger.info("listen queue taken, listeners let go of")
      stop_keeping_alive unless @scoreboard.siblings_listening?(@slot)
    end

    # At every sweep: once let go, the siblings' listeners are awaited.
    def on_sweep
      @access_log&.flush
      stop_keeping_alive if @let_go && !@context.stopping && !@scoreboard.siblings_listening?(@slot)
    end

    def stop_keeping_alive
      @context.stopping = true
      @reactor.retire unless @let_go # no more accepting (a drain stopped it already)
    end

    # Standalone, or a worker whose master let go of the listeners: only
    # this process and its siblings still hold them.
    def last_to_listen?
      @standalone || (!@let_go_pipe.nil? && @let_go_pipe.read_nonblock(1, exception: false).nil?)
    rescue IOError, SystemCallError
      false
    end

    # The pipe's write end lives only in the master: EOF means it died.
    def master_gone
      @reactor.unwatch(@master_pipe)
      graceful_stop("master is gone: finishing requests in progress, then exiting", drain: true)
      # no master is left to enforce `timeout`: do it here
      limit = @config[:timeout]
      Thread.new do
        sleep(limit)
        @access_log&.flush_at_exit
        exit!(1)
      end
    end
  end
end
