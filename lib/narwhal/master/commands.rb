# frozen_string_literal: true

module Narwhal
  class Master
    # What the master does for each signal its loop takes from the queue:
    # stop (QUIT, INT, TERM with or without a drain), reopen logs, re-exec,
    # reload, change the worker count. Part of Master (its state is the
    # master's), apart so the loop reads on its own; docs/SIGNALS.md is the
    # operator's view.
    module Commands
      private

      # A failure while handling a signal is logged; the master carries on.
      def handle_signal(sig)
        return dispatch_signal(sig) if @shutdown.takes?(sig)

        @logger.info("#{sig} ignored: draining") unless @shutdown.stopping?
      rescue StandardError => e
        @logger.error("#{sig} handling failed: #{ErrorMessage.for(e)}#{ErrorMessage.backtrace(e)}")
      end

      def dispatch_signal(sig)
        return if @successor&.hold_back(sig) # until the new master proved itself

        case sig
        when "QUIT" then stop(:QUIT, "QUIT received")
        when "INT" then stop(:TERM, sig)
        when "TERM" then terminate
        when "USR1" then reopen_logs
        when "USR2" then start_upgrade
        when "HUP"
          @notify.reloading
          reload
          @notify.ready(@worker_processes)
        when "TTIN" then change_workers(+1)
        when "TTOU" then change_workers(-1)
        when "WINCH" then winch
        end
      end

      # term_graceful: drain first (the unit is stopping from now on); else
      # Unicorn's quick stop.
      def terminate
        return stop(:TERM, "TERM") if @probation&.stop_gives_up? || !@shutdown.drain(@config, @logger, Clock.now)

        @notify.stopping("TERM: draining", successor: @reexec.pid)
      end

      # why: "QUIT received", "drain_delay over"; or the signal's name. A
      # master on probation after USR2 (upgrade_timeout) gives the upgrade
      # up instead: the old master serves on, and the unit is not stopping.
      def stop(sig, why)
        return abandon_upgrade(why, sig) if @probation&.stop_gives_up?

        @logger.info(sig == :QUIT ? "#{why}: stopping workers gracefully" : "#{why} received: stopping now")
        # before the stop shows: probes taken on a control socket handed to
        # a USR2 successor are answered as they came, before it (not 503)
        let_go_of_listeners
        @shutdown.stop(sig, @config, Clock.now)
        @notify.stopping(why, successor: @reexec.pid) # after USR2 the new master carries the unit on
        @workers.signal_all(sig)
      end

      # The workers hold the listening sockets on, and told so (before their
      # QUIT: they look when it comes) they serve what waits in the listen
      # queue before they let go too (Reactor#retire). A USR2 successor
      # holds them already, and answers probes on the control socket.
      def let_go_of_listeners
        if @reexec.running?
          @control&.stop(unlink: false, hand_over: true)
        else
          @let_go_w.close unless @let_go_w.closed?
        end
        @listener_set.close(unlink: !@reexec.running?)
      end

      def reopen_logs
        System::LogReopener.reopen_logs(@config, @logger, who: "master")
        @workers.signal_all(:USR1)
      end

      def change_workers(delta)
        @worker_processes = (@worker_processes + delta).clamp(0, Scoreboard::MAX_SLOTS)
        @logger.info("worker_processes now #{@worker_processes}")
        @notify.status("serving, worker_processes #{@worker_processes}")
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

      # HUP: load the config file again; on success replace every worker
      # gracefully (they load the app again unless it is preloaded). A broken
      # file is logged and the running configuration stays.
      def reload
        file = @config.file
        config = @config.reload
        if config[:threads] > @scoreboard.threads
          raise ConfigError, "threads #{config[:threads]} is more than the #{@scoreboard.threads} this master " \
                             "started with; USR2 or a restart applies it"
        end
        @config = config
        @logger = @config.logger
        @reexec.logger = @logger
        @monitor = WorkerMonitor.for(@config, @scoreboard, self)
        @workers.config = @config
        @worker_processes = @config[:worker_processes]
        @app_builder.default_middleware = @config[:default_middleware]
        @logger.info("reloaded config_file=#{file || '(none)'}, replacing workers")
        @logger.info(@config[:worker_processes_auto]) if @config[:worker_processes_auto]
        @workers.signal_all(:QUIT)
        @workers.reset_respawn # the app may have been fixed: its workers start at once
      rescue ConfigError, StandardError, ScriptError => e
        @logger.error("error reloading config_file=#{file}: #{e.message}; keeping the running configuration")
      end
    end
  end
end
