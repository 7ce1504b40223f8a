# frozen_string_literal: true

module Narwhal
  # The life of a forked worker, from the fork to exit!: drop what belongs
  # to the master, run the after_fork hook, switch user, build the app
  # (unless preloaded), then serve until told to stop or the master dies.
  #
  # Whatever fails before the worker is ready is a boot failure: the worker
  # tells the master why (Master::WorkerReports) and exits with BOOT_FAILED; the
  # master logs it once and decides when to try again.
  class WorkerProcess
    BOOT_FAILED = 3 # exit status of a worker that could not start serving

    # worker: the Worker the hooks see (its `nr` is its scoreboard slot).
    # hook_server: what the hooks receive as `server` (the master).
    # listeners: the Listener::Set (after_fork may add to it: server.listen).
    # app: the preloaded app, or nil to build one with app_builder.
    # master_pipe: reads EOF once the master is gone; let_go_pipe: once it
    # let go of the listeners (Server). reports: Master::WorkerReports.
    # forget_master: drops what the fork copied but the worker does not own
    # (the master's signal handlers, pipes and worker table). health_check:
    # what the app must pass before the worker serves (after USR2 with
    # upgrade_health_path: Master::Upgrade::HealthCheck), or nil. hand_off:
    # the master's Dispatcher::HandOff, or nil.
    def initialize(worker, config:, hook_server:, listeners:, scoreboard:, app:, app_builder:, master_pipe:,
                   reports:, forget_master:, let_go_pipe: nil, health_check: nil, hand_off: nil)
      @worker = worker
      @config = config
      @logger = config.logger
      @hook_server = hook_server
      @listeners = listeners
      @scoreboard = scoreboard
      @app = app
      @app_builder = app_builder
      @master_pipe = master_pipe
      @let_go_pipe = let_go_pipe
      @reports = reports
      @forget_master = forget_master
      @health_check = health_check
      @hand_off = hand_off
      @ready = false
    end

    # Never returns.
    def run
      Process.setproctitle("narwhal worker[#{@worker.nr}]")
      @forget_master.call
      @scoreboard.reset(@worker.nr, Process.pid) # the slot says whose it is
      hand_off = @hand_off&.among(@listeners.to_a) # those after_fork adds are this worker's alone
      @config[:after_fork].call(@hook_server, @worker)
      user, group = @config[:user]
      if user && !@worker.switched?
        @worker.user(user, group, log_paths: [@config[:stderr_path], @config[:stdout_path]])
      end
      app = @app || @app_builder.call
      server = Server.new(app, @config, listeners: @listeners.to_a, scoreboard: @scoreboard, slot: @worker.nr,
                                        master_pipe: @master_pipe, let_go_pipe: @let_go_pipe, ready: method(:ready),
                                        retire: @reports.method(:retire), health_check: @health_check,
                                        hand_off: hand_off)
      server.run
      @logger.info("worker=#{@worker.nr} pid=#{Process.pid} exiting")
      exit(0) # at_exit hooks of the app run, as in Unicorn
    rescue SignalException
      raise # INT/TERM before the handlers are in place: die of it
    rescue Exception => e # rubocop:disable Lint/RescueException
      boot_failed(e) unless @ready
      raise if e.is_a?(SystemExit)

      @logger.error("worker=#{@worker.nr} pid=#{Process.pid} failed: #{e.class}: #{e.message}" \
                    "#{ErrorMessage.backtrace(e)}")
      exit!(1)
    end

    private

    def ready
      @logger.info("worker=#{@worker.nr} ready pid=#{Process.pid}")
      @config[:after_worker_ready].call(@hook_server, @worker)
      @ready = true
      @scoreboard.worker_slot(@worker.nr).serving = true # the master's metrics: no longer booting
      @reports.ready
    end

    # The master logs the one-line reason; the backtrace is for debug logs.
    def boot_failed(error)
      message = BootError.describe(error)
      @logger.debug { "worker=#{@worker.nr} boot failure backtrace:#{ErrorMessage.backtrace(error)}" }
      unless @reports.boot_failed(message)
        @logger.error("worker=#{@worker.nr} pid=#{Process.pid} failed to boot: #{message}")
      end
      exit!(BOOT_FAILED)
    end
  end
end
