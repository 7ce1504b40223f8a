# frozen_string_literal: true

require "socket"

module Narwhal
  # The master process: binds or inherits the listeners, optionally
  # preloads the app, forks `worker_processes` workers and keeps that many
  # alive. It never serves a request. Its loop sleeps on a self-pipe; signal
  # handlers only enqueue. See docs/SIGNALS.md for what each signal does.
  #
  # Workers that fail to boot are forked again with a growing delay
  # (RespawnPolicy); when none ever became ready the master gives up.
  class Master
    # Queued for the loop; CHLD only wakes it (it reaps on every pass).
    QUEUED_SIGNALS = %w[QUIT INT TERM USR1 USR2 HUP TTIN TTOU WINCH].freeze
    # Longest sleep of the loop; timeouts are checked at least this often.
    MAX_SLEEP = 1.0
    # After INT/TERM, workers not gone within this many seconds get KILL.
    KILL_AFTER = 10
    FD_ENV = "NARWHAL_FD"

    attr_reader :config, :logger, :listeners, :scoreboard, :app, :worker_processes, :pid_file

    def initialize(config, app_builder, daemon: nil)
      @config = config
      @logger = config.logger
      @app_builder = app_builder
      @daemon = daemon
      @listeners = []
      @workers = {} # pid => Worker
      @signals = SignalQueue.new
      @worker_processes = config[:worker_processes]
      @reexec = Reexec.new(@logger)
      @respawn = RespawnPolicy.new
      @reports = WorkerReports.new
      @pid_file = nil
      @app = nil
      @stopping = nil
    end

    # --- what Unicorn's hooks call on `server` ---

    # The pid file's path (Unicorn's HttpServer#pid), nil without one.
    def pid
      @pid_file&.path
    end

    # Binds another listener. From after_fork it is the worker's own (the
    # per-worker port trick); tries: -1 retries until the port is free.
    def listen(address, options = {})
      listener = Listener.new(address.to_s, options, @logger)
      @listeners << listener
      @logger.info("listening on addr=#{listener.address} fd=#{listener.io.fileno}")
      ListenBanner.listening(@logger, listener)
      listener
    end

    # --- running ---

    # Raises BootError, with nothing bound or forked, when a preloaded app
    # does not load.
    def start
      Dir.chdir(@config[:working_directory]) if @config[:working_directory]
      redirect_io
      @app = build_app if @config[:preload_app]
      setup_listeners
      ListenBanner.how_to_stop(@logger)
      write_pid_file
      @scoreboard = Scoreboard.new(Scoreboard::MAX_SLOTS)
      @master_r, @master_w = IO.pipe # workers see EOF when the master is gone
      install_signals
      Process.setproctitle("narwhal master")
      @logger.info("master pid=#{Process.pid} started (narwhal #{VERSION}, #{@worker_processes} worker(s))")
      spawn_missing_workers
      self
    end

    # Runs the master loop; returns the exit status.
    def join
      loop do
        reap_workers
        while (sig = @signals.pop)
          handle_signal(sig)
        end
        break if @stopping && @workers.empty?

        if @stopping
          signal_workers(@stopping) # again, for any worker that missed it
          kill_stragglers
        else
          return give_up if @respawn.give_up?

          kill_timed_out_workers
          maintain_worker_count
        end
        sleep_on_pipe
      end
      shutdown
      0
    ensure
      @signals.restore # for a program that runs the master inside it (rackup)
    end

    # Loads the app (in the master with preload_app, else in each worker).
    def build_app
      @app_builder.call
    end

    # In a freshly forked worker: drop the master's handlers and pipes.
    def after_fork_in_worker
      # QUIT/USR1 ignored until the worker's own handlers are in place: the
      # master repeats QUIT until the worker is gone, and QUIT's default
      # would dump core
      @signals.reset_in_child(ignore: %w[QUIT USR1])
      @master_w.close
      @reports.close_reader
      @daemon&.close_in_child
      @workers.clear
      srand # workers must not share a random sequence
    end

    private

    # --- start-up ---

    def redirect_io
      reopen_std($stderr, @config[:stderr_path])
      reopen_std($stdout, @config[:stdout_path])
    end

    def reopen_std(io, path)
      return unless path

      io.reopen(path, "a")
      io.sync = true
    end

    # Inherited sockets named by the config are kept (no gap in accepting);
    # the others are closed. The default address applies only when neither
    # the config nor a parent gave any.
    def setup_listeners
      inherited = inherited_listeners
      configured = @config[:listeners]
      configured = [[@config[:default_listen], {}]] if configured.empty? && inherited.empty?
      configured.each do |address, options|
        wanted = Listener.expand_addr(address)
        if (kept = inherited.find { |l| l.address == wanted })
          inherited.delete(kept)
          @listeners << kept
          log_inherited(kept)
        else
          listen(address, options)
        end
      end
      if configured.empty?
        @listeners.concat(inherited)
        inherited.each { |l| log_inherited(l) }
      else
        inherited.each do |l|
          @logger.info("closing inherited addr=#{l.address}: not in the configuration")
          l.close(unlink: false)
        end
      end
    end

    def log_inherited(listener)
      @logger.info("inherited addr=#{listener.address} fd=#{listener.io.fileno}")
      ListenBanner.listening(@logger, listener)
    end

    def inherited_listeners
      fds = ENV.fetch(FD_ENV, nil) || ENV.fetch("UNICORN_FD", nil)
      list = fds.to_s.split(",").map { |fd| Integer(fd, 10) }
      if ENV["LISTEN_PID"].to_i == Process.pid
        count = ENV["LISTEN_FDS"].to_i
        list.concat((3...(3 + count)).to_a)
      end
      [FD_ENV, "UNICORN_FD", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"].each { |k| ENV.delete(k) }
      list.uniq.map { |fd| Listener.inherit(fd) }
    end

    def write_pid_file
      return unless @config[:pid]

      @pid_file = PidFile.new(@config[:pid])
      @pid_file.write
    end

    # --- workers ---

    # While workers fail to boot the policy holds forks back.
    def spawn_missing_workers
      allowance = @respawn.allowance(Clock.now)
      busy = @workers.values.map(&:nr)
      (0...@worker_processes).each do |nr|
        next if busy.include?(nr)
        break if allowance&.zero?

        spawn_worker(Worker.new(nr))
        allowance &&= allowance - 1
      end
    end

    def spawn_worker(worker)
      @scoreboard.reset(worker.nr)
      @config[:before_fork].call(self, worker)
      worker.pid = fork { WorkerProcess.new(self, worker, @master_r, @reports).run }
      @workers[worker.pid] = worker
      @respawn.spawned(worker.pid)
    end

    # Extra workers (after TTOU or a smaller HUP) and retiring ones get QUIT
    # again on every pass: one forked an instant ago may not have its
    # handlers yet and would miss a single signal.
    def maintain_worker_count
      @workers.each_value do |w|
        signal_worker(w, :QUIT) if w.quitting || w.nr >= @worker_processes
      end
      spawn_missing_workers
    end

    def reap_workers
      loop do
        pid, status = Process.wait2(-1, Process::WNOHANG)
        break unless pid

        read_reports # a worker's report is in the pipe before it exits
        if pid == @reexec.pid
          @pid_file = @reexec.failed(status, @pid_file)
        elsif (worker = @workers.delete(pid))
          @scoreboard.reset(worker.nr)
          @config[:after_worker_exit].call(self, worker, status)
          failure = @respawn.exited(worker, status, Clock.now, stopping: !@stopping.nil?)
          @logger.error(failure) if failure
        end
      end
    rescue Errno::ECHILD
      nil
    end

    def read_reports
      @reports.drain.each do |pid, kind, message|
        case kind
        when "ready" then worker_ready(pid)
        when "failed" then @respawn.boot_error(pid, message)
        end
      end
    end

    # `-D` returns to the shell once the first worker serves.
    def worker_ready(pid)
      first = @respawn.ready(pid)
      @daemon&.ready(pid_file: @pid_file&.path, stderr_path: @config[:stderr_path]) if first
    end

    # No worker ever became ready and retrying will not help: exit non-zero.
    def give_up
      message = "no worker could boot (#{@respawn.rounds} attempts), exiting: #{@respawn.last_error}"
      @logger.error(message)
      @daemon&.failed(message)
      shutdown
      1
    end

    # A worker on one request for longer than `timeout` is killed and
    # replaced; idle workers are never timed out.
    def kill_timed_out_workers
      timeout = @config[:timeout]
      @workers.each do |pid, worker|
        busy = @scoreboard.busy_for(worker.nr)
        next unless busy && busy > timeout

        @logger.error("worker=#{worker.nr} pid=#{pid} timeout (#{busy.round(3)}s > #{timeout}s), killing")
        signal_worker(worker, :KILL)
      end
    end

    def signal_worker(worker, sig)
      worker.quitting = true if sig == :QUIT
      Process.kill(sig, worker.pid)
    rescue Errno::ESRCH
      nil
    end

    def signal_workers(sig)
      @workers.each_value { |w| signal_worker(w, sig) }
    end

    # --- signals ---

    def install_signals
      @signals.queue(*QUEUED_SIGNALS)
      @signals.wake_on("CHLD")
    end

    # Also wakes for a worker's report, and when a held-back fork is due.
    def sleep_on_pipe
      timeout = [@config[:timeout] / 2.0, MAX_SLEEP, @respawn.wait(Clock.now)].compact.min
      read_reports if @signals.wait(timeout, [@reports.reader])
    end

    # A failure while handling a signal is logged; the master carries on.
    def handle_signal(sig)
      # while stopping, only a quicker stop is still taken
      return if @stopping && !%w[INT TERM].include?(sig)

      dispatch_signal(sig)
    rescue StandardError => e
      @logger.error("#{sig} handling failed: #{ErrorMessage.for(e)}#{ErrorMessage.backtrace(e)}")
    end

    def dispatch_signal(sig)
      case sig
      when "QUIT" then stop(:QUIT, sig)
      when "INT", "TERM" then stop(:TERM, sig)
      when "USR1" then reopen_logs
      when "USR2" then @pid_file = @reexec.start(self, @pid_file)
      when "HUP" then reload
      when "TTIN" then change_workers(+1)
      when "TTOU" then change_workers(-1)
      when "WINCH" then winch
      end
    end

    def stop(sig, name)
      @logger.info(sig == :QUIT ? "QUIT received: stopping workers gracefully" : "#{name} received: stopping now")
      @stopping = sig
      @kill_at = Clock.now + (sig == :QUIT ? @config[:timeout] + KILL_AFTER : KILL_AFTER)
      signal_workers(sig)
    end

    def kill_stragglers
      return if Clock.now < @kill_at

      @workers.each_value do |w|
        @logger.error("worker=#{w.nr} pid=#{w.pid} did not stop in time, killing")
        signal_worker(w, :KILL)
      end
      @kill_at = Clock.now + KILL_AFTER
    end

    def change_workers(delta)
      @worker_processes = [@worker_processes + delta, 0].max
      @worker_processes = [@worker_processes, Scoreboard::MAX_SLOTS].min
      @logger.info("worker_processes now #{@worker_processes}")
    end

    # Unicorn's rule: only a daemonized master drops to zero workers on
    # WINCH (a terminal resize must not stop a foreground server).
    def winch
      unless @daemon || Process.ppid == 1
        @logger.info("WINCH ignored: the master is not daemonized")
        return
      end
      @logger.info("WINCH received: stopping all workers, the master stays")
      @worker_processes = 0
    end

    def reopen_logs
      count = LogReopener.reopen($stderr => @config[:stderr_path], $stdout => @config[:stdout_path])
      @logger.info("master reopened #{count} log file(s)")
      signal_workers(:USR1)
    end

    # HUP: load the config file again; on success replace every worker
    # gracefully (they load the app again unless it is preloaded). A broken
    # file is logged and the running configuration stays.
    def reload
      file = @config.file
      new_config = @config.reload
      @config = new_config
      @logger = new_config.logger
      @reexec.logger = @logger
      @worker_processes = new_config[:worker_processes]
      @app_builder.default_middleware = new_config[:default_middleware]
      @logger.info("reloaded config_file=#{file || '(none)'}, replacing workers")
      signal_workers(:QUIT)
      @respawn.reset # the app may have been fixed: its workers start at once
    rescue ConfigError, StandardError, ScriptError => e
      @logger.error("error reloading config_file=#{file}: #{e.message}; keeping the running configuration")
    end

    def shutdown
      # Unix socket files stay while a re-exec'd master uses them.
      unlink = !@reexec.running?
      @listeners.each { |l| l.close(unlink: unlink) }
      @pid_file&.unlink
      @logger.info("master pid=#{Process.pid} exiting")
    end

  end
end
