# frozen_string_literal: true

require "test_helper"
require "logger"
require "stringio"

# What the master does for each signal its loop takes from the queue, on a
# master with real listeners, config file, shutdown state and scoreboard,
# and a worker table that notes the signals it is asked to send.
class MasterCommandsTest < Minitest::Test
  # The worker table as the commands use it: every signal and reload noted.
  class Workers
    attr_reader :signals, :config, :resets

    def initialize
      @signals = []
      @resets = 0
    end

    def signal_all(sig) = @signals << sig
    def reset_respawn = @resets += 1
    attr_writer :config
  end

  def setup
    @dir = Dir.mktmpdir("narwhal-commands")
    @config_path = File.join(@dir, "narwhal.rb")
    File.write(@config_path, "worker_processes 2\n")
    @log = StringIO.new
    @logger = Logger.new(@log)
    @socket = File.join(@dir, "app.sock")
    @master = master
  end

  def teardown
    @master.instance_variable_get(:@listener_set).close
    FileUtils.rm_rf(@dir)
  end

  # A master past its start, without forking: what the commands touch.
  def master
    config = Narwhal::Configurator.new(file: @config_path)
    config.settings[:logger] = @logger
    listeners = Narwhal::Listener::Set.new(@logger)
    listeners.listen(@socket)
    @let_go_r, let_go_w = IO.pipe
    @workers = Workers.new
    Narwhal::Master.allocate.tap do |m|
      { config: config, logger: @logger, worker_processes: 2, listener_set: listeners, let_go_w: let_go_w,
        shutdown: Narwhal::Master::Shutdown.new, notify: Narwhal::Master::SystemdNotify.new(@logger, {}),
        reexec: Narwhal::Master::Reexec.new(@logger), workers: @workers, control: nil, daemon: nil,
        scoreboard: Narwhal::Scoreboard.new(4, threads: 1), app_builder: Struct.new(:default_middleware).new(true) }
        .each { |name, value| m.instance_variable_set(:"@#{name}", value) }
    end
  end

  def signal(sig)
    @master.send(:handle_signal, sig)
  end

  # QUIT: the master lets go of the listeners first (the workers read EOF on
  # the let-go pipe and drain the listen queue), then asks them to finish.
  def test_quit_lets_go_of_the_listeners_and_stops_the_workers_gracefully
    signal("QUIT")
    assert_equal [:QUIT], @workers.signals
    assert_includes @log.string, "QUIT received: stopping workers gracefully"
    assert_nil @let_go_r.read_nonblock(1, exception: false), "EOF on the let-go pipe"
    refute File.exist?(@socket), "the socket file is removed: no successor serves it"
    assert @master.draining?
    signal("HUP")
    assert_equal [:QUIT], @workers.signals, "a reload while stopping is not taken"
  end

  def test_int_and_term_without_term_graceful_stop_at_once
    signal("INT")
    assert_equal [:TERM], @workers.signals
    assert_includes @log.string, "INT received: stopping now"
  end

  # term_graceful: the first TERM drains; the workers are told nothing yet,
  # and a second TERM stops at once.
  def test_term_with_term_graceful_drains_first
    @master.config.settings.update(term_graceful: true, drain_delay: 5)
    signal("TERM")
    assert_empty @workers.signals
    assert_includes @log.string, "TERM received: draining, serving for 5s (drain_delay)"
    assert @master.draining?
    signal("HUP")
    assert_includes @log.string, "HUP ignored: draining"
    signal("TERM")
    assert_equal [:TERM], @workers.signals
  end

  def test_ttin_and_ttou_change_the_worker_count_within_the_scoreboard
    signal("TTIN")
    assert_equal 3, @master.worker_processes
    3.times { signal("TTOU") }
    assert_equal 0, @master.worker_processes
    signal("TTOU")
    assert_equal 0, @master.worker_processes, "never below zero"
    @master.instance_variable_set(:@worker_processes, Narwhal::Scoreboard::MAX_SLOTS)
    signal("TTIN")
    assert_equal Narwhal::Scoreboard::MAX_SLOTS, @master.worker_processes, "never past the scoreboard"
    assert_includes @log.string, "worker_processes now 3\n"
  end

  # Unicorn's rule: a terminal resize must not stop a foreground server.
  def test_winch_stops_the_workers_of_a_daemon_only
    skip "this test runs as a daemon's child" if Process.ppid == 1
    signal("WINCH")
    assert_equal 2, @master.worker_processes
    assert_includes @log.string, "WINCH ignored: the master is not daemonized"
    @master.instance_variable_set(:@daemon, Object.new)
    signal("WINCH")
    assert_equal 0, @master.worker_processes
  end

  def test_usr1_reopens_the_masters_logs_and_tells_the_workers
    File.write(@config_path, "stderr_path #{File.join(@dir, 'err.log').inspect}\n")
    @master.instance_variable_set(:@config, Narwhal::Configurator.new(file: @config_path))
    @master.config.settings[:logger] = @logger
    saved = $stderr.dup
    signal("USR1")
    assert_match(/master reopened \d+ log file\(s\)/, @log.string)
    assert_equal [:USR1], @workers.signals
    warn "to the reopened stderr"
    # (other tests' leftover log files may be warned about before it)
    assert_equal "to the reopened stderr\n", File.readlines(File.join(@dir, "err.log")).last
  ensure
    $stderr.reopen(saved) if saved
  end

  # The reloaded file's logger is the master's from then on.
  def test_hup_reloads_the_file_and_replaces_every_worker
    log_path = File.join(@dir, "master.log")
    File.write(@config_path, "worker_processes 3\ntimeout 9\nlogger Logger.new(#{log_path.inspect})\n")
    signal("HUP")
    assert_equal 3, @master.worker_processes
    assert_equal 9, @master.config[:timeout]
    assert_same @master.config, @workers.config
    assert_equal [:QUIT], @workers.signals
    assert_equal 1, @workers.resets, "the fixed app's workers start at once"
    assert_includes File.read(log_path), "reloaded config_file=#{@config_path}, replacing workers"
  ensure
    @master.config.logger.close if log_path && @master.config.logger != @logger
  end

  # A broken file, or more threads than the scoreboard has room for: logged,
  # and the running configuration stays.
  def test_a_hup_that_cannot_apply_keeps_the_running_configuration
    running = @master.config
    File.write(@config_path, "worker_processes 0\n")
    signal("HUP")
    assert_includes @log.string, "error reloading config_file=#{@config_path}: #{@config_path}:1: worker_processes " \
                                 "expects an Integer >= 1 or :auto, got 0; keeping the running configuration"
    File.write(@config_path, "threads 4\n")
    signal("HUP")
    assert_includes @log.string, "threads 4 is more than the 1 this master started with; USR2 or a restart applies it"
    assert_same running, @master.config
    assert_empty @workers.signals
  end

  # A master that cannot re-exec (rackup, rails server) says why; a failure
  # inside a command is logged and the master carries on.
  def test_usr2_refused_and_a_failing_command_are_logged
    @master.instance_variable_set(:@reexec, Narwhal::Master::Reexec.new(@logger, available: false))
    signal("USR2")
    assert_includes @log.string, Narwhal::Master::Reexec::REFUSED
    @master.instance_variable_set(:@workers, nil)
    signal("USR1")
    assert_match(/USR1 handling failed: .*signal_all/, @log.string)
  end
end
