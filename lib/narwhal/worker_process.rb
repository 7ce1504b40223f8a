# frozen_string_literal: true

module Narwhal
  # The life of a forked worker, from the fork to exit!: drop what belongs
  # to the master, run the after_fork hook, switch user, build the app
  # (unless preloaded), then serve until told to stop or the master dies.
  #
  # Whatever fails before the worker is ready is a boot failure: the worker
  # tells the master why (WorkerReports) and exits with BOOT_FAILED; the
  # master logs it once and decides when to try again.
  class WorkerProcess
    BOOT_FAILED = 3 # exit status of a worker that could not start serving

    def initialize(master, worker, master_pipe, reports)
      @master = master
      @worker = worker
      @master_pipe = master_pipe
      @reports = reports
      @config = master.config
      @logger = master.logger
      @ready = false
    end

    # Never returns.
    def run
      Process.setproctitle("narwhal worker[#{@worker.nr}]")
      @master.after_fork_in_worker
      @config[:after_fork].call(@master, @worker)
      user, group = @config[:user]
      if user && !@worker.switched?
        @worker.user(user, group, log_paths: [@config[:stderr_path], @config[:stdout_path]])
      end
      app = @master.app || @master.build_app
      server = Server.new(app, @config, listeners: @master.listeners, scoreboard: @master.scoreboard,
                                        slot: @worker.nr, master_pipe: @master_pipe, ready: method(:ready))
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
      @config[:after_worker_ready].call(@master, @worker)
      @ready = true
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
