# frozen_string_literal: true

module Narwhal
  # The master process: binds or inherits the listeners, optionally
  # preloads the app, forks `worker_processes` workers and keeps that many
  # alive. It never serves a request. Its loop (`join`) reaps exited
  # workers, acts on queued signals, applies the worker policies (timeout),
  # forks the missing workers and sleeps on its self-pipe. docs/SIGNALS.md
  # says what each signal does, docs/DESIGN.md why the loop is so.
  #
  # It is also the `server` Unicorn's hooks receive: `pid`, `listen`,
  # `config`, `logger`, `worker_processes` keep Unicorn's names.
  class Master
    autoload :Commands, "narwhal/master/commands"
    autoload :Control, "narwhal/master/control"
    autoload :ForkLimits, "narwhal/master/fork_limits"
    autoload :ForkRefused, "narwhal/master/forker"
    autoload :Forker, "narwhal/master/forker"
    autoload :MainLoop, "narwhal/master/main_loop"
    autoload :MemoryHeadroom, "narwhal/master/memory_headroom"
    autoload :PidFile, "narwhal/master/pid_file"
    autoload :Recycler, "narwhal/master/recycler"
    autoload :Reexec, "narwhal/master/reexec"
    autoload :RespawnPolicy, "narwhal/master/respawn_policy"
    autoload :Shutdown, "narwhal/master/shutdown"
    autoload :SystemdNotify, "narwhal/master/systemd_notify"
    autoload :Tally, "narwhal/master/tally"
    autoload :Upgrade, "narwhal/master/upgrade"
    autoload :WorkerMonitor, "narwhal/master/worker_monitor"
    autoload :WorkerReports, "narwhal/master/worker_reports"
    autoload :WorkerTable, "narwhal/master/worker_table"

    include Commands # what each signal does
    include MainLoop
    include Upgrade # USR2's two sides: the old master's, the new one's probation

    # Queued for the loop; CHLD only wakes it (it reaps on every pass).
    QUEUED_SIGNALS = %w[QUIT INT TERM USR1 USR2 HUP TTIN TTOU WINCH].freeze
    # Longest sleep of the loop; the policies may ask for a shorter one.
    MAX_SLEEP = 1.0
    # After INT/TERM, workers not gone within this many seconds get KILL
    # (after QUIT: graceful_timeout, by default timeout + this).
    KILL_AFTER = 10

    attr_reader :config, :logger, :worker_processes
    # What happened to the workers so far (Tally): for /metrics.
    attr_reader :tally

    # app_builder: #call returns the app (run here with preload_app, else in
    # each worker). daemon: the -D launcher's CLI::Daemon. reexec: false refuses
    # USR2 (rackup and rails server consume their command lines, so a new
    # master could not be started from them).
    def initialize(config, app_builder, daemon: nil, reexec: true)
      @config = config
      @logger = config.logger
      @app_builder = app_builder
      @daemon = daemon
      @forker = Forker.new # one watchdog thread for every fork of the master
      @reexec = Reexec.new(@logger, available: reexec, forker: @forker)
      @worker_processes = config[:worker_processes]
      @listener_set = Listener::Set.new(@logger)
      @pid_file = nil
      @app = nil
      @shutdown = Shutdown.new
      @tally = Tally.new
      @failed_passes = 0 # passes in a row that raised
      @successor = nil # the master USR2 started (Upgrade::Successor)
      @handoff = nil # upgrade_retire_old's steps, once it is ready
      @probation = nil # this master's, when USR2 started it
    end

    # While true /ready answers 503 (load balancers take the server out):
    # from a TERM with term_graceful, or any stop, on.
    def draining?
      @shutdown.draining?
    end

    # Whether this is the old master of a USR2 hand-over: its successor runs
    # (the agent answers `drain`).
    def handing_over?
      @reexec.running?
    end

    # --- what Unicorn's hooks call on `server` ---

    # The pid file's path (Unicorn's HttpServer#pid), nil without one.
    def pid
      @pid_file&.path
    end

    # Binds another listener. From after_fork it is the worker's own (the
    # per-worker port trick); tries: -1 retries until the port is free.
    def listen(address, options = {})
      @listener_set.listen(address, options)
    end

    def listeners
      @listener_set.to_a
    end

    # --- running ---

    # Raises BootError, with nothing bound or forked, when a preloaded app
    # does not load.
    def start
      Dir.chdir(@config[:working_directory]) if @config[:working_directory]
      System::LogReopener.redirect_std(@config)
      @probation = Upgrade::Probation.take(@logger) # before the app sees the environment
      @app = @app_builder.call if @config[:preload_app]
      reexeced = ENV.key?(Listener::Set::FD_ENV) # read before open removes it
      @listener_set.open(@config[:listeners], default: @config[:default_listen])
      Listener::Banner.how_to_stop(@logger)
      @pid_file = PidFile.new(@config[:pid]).tap(&:write) if @config[:pid]
      @scoreboard = Scoreboard.new(Scoreboard::MAX_SLOTS, threads: @config[:threads])
      @hand_off = Dispatcher::HandOff.open # the workers' line for kept-alive connections
      @monitor = WorkerMonitor.for(@config, @scoreboard, self)
      @master_r, @master_w = IO.pipe # workers see EOF when the master is gone
      # and this one's EOF once it let go of the listeners for good (a stop
      # with no USR2 successor): the workers are then the last to hold them
      @let_go_r, @let_go_w = IO.pipe
      @notify = SystemdNotify.new(@logger)
      @workers = worker_table
      @recycler = Recycler.new(@workers, @tally)
      @control = start_control(wait_if_busy: reexeced)
      @signals = System::SignalQueue.new
      @signals.queue(*QUEUED_SIGNALS)
      @signals.wake_on("CHLD")
      Process.setproctitle("narwhal master")
      @logger.info("master pid=#{Process.pid} started (narwhal #{VERSION}, #{@worker_processes} worker(s))")
      @logger.info(@config[:worker_processes_auto]) if @config[:worker_processes_auto]
      MemoryHeadroom.check(@logger, @worker_processes)
      @workers.spawn_missing(@worker_processes)
      self
    end

    private

    # --- workers ---

    def worker_table
      ready = method(:first_worker_ready)
      # a worker a soft timeout interrupted is replaced first, as a recycled one
      retire = ->(worker) { @recycler.retire(worker, nil) }
      WorkerTable.new(@config, @scoreboard, self, on_first_ready: ready, on_retire: retire,
                                                  tally: @tally, forker: @forker) do |worker, reports|
        worker_process(worker, reports).run
      end
    end

    # What a forked worker runs (WorkerProcess), given what it needs.
    def worker_process(worker, reports)
      WorkerProcess.new(worker, config: @config, hook_server: self, listeners: @listener_set,
                                scoreboard: @scoreboard, app: @app, app_builder: @app_builder,
                                master_pipe: @master_r, let_go_pipe: @let_go_r, reports: reports, hand_off: @hand_off,
                                forget_master: method(:forget_in_worker), health_check: @probation&.health_check)
    end

    # In a freshly forked worker: what belongs to the master goes. QUIT and
    # USR1 are ignored until the worker's own handlers are in place: the
    # master repeats QUIT until the worker is gone, and QUIT's default would
    # dump core.
    def forget_in_worker
      @signals.reset_in_child(ignore: %w[QUIT USR1])
      @master_w.close
      @let_go_w.close
      @control&.close_in_child
      @workers.forget_in_child
      @daemon&.close_in_child
      @notify.forget_in_child
      @probation&.forget_in_child
      @successor&.close
      srand # workers must not share a random sequence
    end

    # `-D` returns to the shell once the first worker serves; inherited
    # control and agent sockets are answered on from now; the old master
    # hears of it.
    def first_worker_ready
      @control.start(wait_if_busy: true) if @control && !@control.started?
      @probation&.serving
      @notify.ready(@worker_processes) unless @probation&.withholds_ready?
      @daemon&.ready(pid_file: @pid_file&.path, stderr_path: @config[:stderr_path])
    end

    # A child that is not a worker: USR2's new master, dead. This master
    # carries on, and answers the agent again.
    def reexec_exited(pid, status)
      return unless pid == @reexec.pid

      @pid_file = @reexec.failed(status, @pid_file)
      @control&.take_back
      successor_exited(status)
    end

    # No worker ever became ready and retrying will not help: exit non-zero
    # (after USR2, the old master hears why).
    def give_up(reason)
      @logger.error(reason)
      @probation&.fail(reason)
      @daemon&.failed(reason)
      1
    end

    # control_listen and agent_listen: one thread reads the scoreboard for
    # both (Control). After USR2 the old master passed its sockets down
    # (Control::Handover, Control::Agent): they are answered on once a
    # worker serves (until then the old master answers alone). Without
    # them (an address changed) the address may still be the old master's:
    # the new one waits for it.
    def start_control(wait_if_busy:)
      address = @config[:control_listen]
      inherited = Control::Handover.take(address)
      agent = Control::Agent.take(@config[:agent_listen], @logger)
      return unless address || agent

      status = Control::Status.new(self, @scoreboard, @workers, paths: @config[:control_status_paths])
      control = Control.new(address, status, @logger, listener: inherited, agent: agent)
      return control.start(wait_if_busy: wait_if_busy) unless control.inherited?

      control.bind_sockets(wait_if_busy: true) # one whose address changed
      @logger.info("control listener on #{control.address} inherited, answering once a worker serves") if inherited
      @logger.info("agent listener on #{agent.address} inherited, answering once a worker serves") if agent&.inherited?
      control
    end

    # Unix socket files stay while a re-exec'd master uses them.
    def shutdown
      @control&.stop(unlink: !@reexec.running?)
      @listener_set.close(unlink: !@reexec.running?)
      @pid_file&.unlink
      @logger.info("master pid=#{Process.pid} exiting")
    end
  end
end
