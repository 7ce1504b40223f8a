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
  # also run one on its own (.standalone: no master, no workers; it binds
  # or inherits its listeners itself and gives back the signal handlers it
  # found when it returns).
  class Server
    autoload :HandingOff, "narwhal/server/handing_off"
    autoload :Limits, "narwhal/server/limits"
    autoload :Stopping, "narwhal/server/stopping"
    include Stopping
    include HandingOff

    SIGNALS = %w[QUIT INT TERM USR1].freeze
    # Queued with the signals by an app thread whose request soft_timeout
    # interrupted: the reactor's thread retires the worker.
    RETIRE = :retire

    # A server of its own, with no master: it binds the configured
    # addresses (or inherits them) when it runs, and closes them after.
    def self.standalone(app, config)
      new(app, config, listeners: [], standalone: true)
    end

    # listeners: already bound Listener objects (a worker's).
    # scoreboard/slot: where request start times go for the master's
    # timeout; master_pipe: readable at EOF when the master is gone;
    # let_go_pipe: at EOF once the master let go of the listeners for good
    # (its workers then serve the listen queue first). retire: asks the
    # master for a replacement (true when it was told). health_check: the
    # app must pass it (#verify raises) before the first connection is taken.
    # hand_off: the master's Dispatcher::HandOff line (HandingOff), or nil.
    def initialize(app, config, listeners:, scoreboard: nil, slot: 0, master_pipe: nil, let_go_pipe: nil,
                   ready: nil, retire: nil, standalone: false, health_check: nil, hand_off: nil)
      @app = app
      @config = config
      @logger = config.logger
      @limits = Limits.from(config)
      @standalone = standalone
      @listeners = listeners
      @hand_off = hand_off
      @factories = [] # by origin (HandingOff)
      @inbox = @release = nil
      take_slot(scoreboard || Scoreboard.new(1, threads: config[:threads]), slot)
      # one per process: the bound on what its connections spool together
      @spool_budget = SocketWriter::SpoolBudget.from_config(config)
      # one per process: every responder's heads copy its line (orca_load_report)
      @load_report = LoadReport.new(scoreboard, slot, @threads) if config[:orca_load_report]
      @soft_timeout = Responder::SoftTimeout.new(config[:soft_timeout], @logger) if config[:soft_timeout]
      path, format = config[:access_log]
      @access_log = path && AccessLog.open(path, format, @logger)
      @poller = Poller.new(threaded?) # the reactor's epoll set; with threads Shedding reads it too
      @dispatcher = threaded? ? Dispatcher::Threaded.new : Dispatcher::Inline.new(responder_for(0))
      @context = Connection::Context.new(@limits, @dispatcher, @logger, @counters, false, @access_log, shedding)
      @master_pipe = master_pipe
      @let_go_pipe = let_go_pipe
      @ready = ready
      @health_check = health_check
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
      @health_check&.verify(@app, base_env.merge(@listeners.first.env_defaults))
      @load_report&.listeners = @listeners.map { |l| l.io.fileno } # their accept queues count
      gate = threaded? ? Dispatcher::AcceptGate.new(@threads, @scoreboard, @slot, @listeners.map(&:io)) : nil
      cap = Configurator::ConnectionCap.new(@config[:worker_connections]).limit
      @reactor = Reactor.new(@logger, max_handlers: cap, gate: gate, poller: @poller)
      @listeners.each { |l| accept_from(l) }
      join_hand_off
      install_signals
      @reactor.watch(@master_pipe) { master_gone } if @master_pipe
      @reactor.on_sweep { on_sweep }
      Dispatcher::ForkGuard.arm(@threads) if threaded?
      @soft_timeout&.start
      @counters.accepting = @threads # siblings count this many sub-slots as threads
      @reactor.publish_waiting(@counters) # siblings see its idle threads
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

    # Worker slot `slot` of the scoreboard; no more threads than it has sub-slots.
    def take_slot(scoreboard, slot)
      @scoreboard = scoreboard
      @slot = slot
      @counters = scoreboard.worker_slot(slot)
      @threads = [@config[:threads], scoreboard.threads].min
    end

    def threaded?
      @threads > 1
    end

    # With siblings: responses may be shed (Dispatcher::Shedding), and a
    # kept-alive connection let go while one has an idle thread.
    def shedding
      Dispatcher::Shedding.new(@poller, @scoreboard, @slot) if @scoreboard.size > 1
    end

    # In loop thread i (also one started again after the app ended the
    # one before): its responder, watched by soft_timeout when on.
    def start_thread(i)
      @dispatcher.serve_here(responder_for(i))
    end

    # The Responder of app thread number i, on that thread (its scoreboard
    # thread slot); with soft_timeout on, the watchdog watches the thread.
    # With one thread (Dispatcher::Inline) it is the reactor's; with more
    # each loop thread gets its own as it starts (#start_thread).
    def responder_for(i)
      thread = Thread.current
      thread_slot = @scoreboard.thread_slot(@slot, i)
      thread_slot.bind_thread! # the master may ask this thread for its backtrace near timeout
      BacktraceSignal.install
      options = { access_log: @access_log&.line_writer, keep_alive: ResponseWriter.keep_alive_line(@limits.keepalive_timeout),
                  load_report: @load_report, trust_queue_header: @config[:trust_x_request_start],
                  queue_deadline: @limits.queue_deadline, retry_after: @config[:queue_deadline_retry_after] }
      return Responder.new(@app, @logger, thread_slot, @counters, **options) unless @soft_timeout

      Responder::Watched.new(@app, @logger, thread_slot, @counters,
                             soft_timeout: @soft_timeout.watch(thread, thread_slot),
                             on_timeout: method(:request_interrupted), **options)
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
      origin = @hand_off&.origin(listener) # its connections may move to a sibling
      factory = Connection::Factory.new(listener, template, @context, @counters,
                                        budget: @spool_budget, early_hints: @config[:early_hints],
                                        threaded: threaded?, counting: !@access_log.nil?, origin: origin)
      @factories[origin] = factory if origin
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

  end
end
