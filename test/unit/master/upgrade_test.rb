# frozen_string_literal: true

require "test_helper"
require "logger"
require "stringio"
require "support/notify_socket"

# Both sides of a USR2 upgrade as the master runs them, on a master past
# its start with a worker table that notes the signals it is asked to send:
# the old master following its successor (what it held back, what it gives
# back, the hand-over), and the new master's verdict.
class MasterUpgradeTest < Minitest::Test
  Upgrade = Narwhal::Master::Upgrade

  # The worker table as the upgrade uses it.
  class Workers
    include Enumerable
    attr_reader :signals
    attr_accessor :last_boot_error

    def initialize(workers)
      @list = workers
      @signals = []
    end

    def each(&block) = @list.each(&block)
    def empty? = @list.empty?
    def signal_all(sig) = each { |w| signal(w, sig) }

    def signal(worker, sig)
      worker.quitting = true if sig == :QUIT
      @signals << [worker.nr, sig]
    end

    def reap(worker) = @list.delete(worker)
    def read_reports = nil

    # TTOU's way, as the master's loop does it on each pass.
    def retire_beyond(count)
      each { |w| signal(w, :QUIT) if w.place >= count && !w.quitting }
    end
  end

  def setup
    @dir = Dir.mktmpdir("narwhal-upgrade-unit")
    @log = StringIO.new
    @logger = Logger.new(@log)
    @notify = Narwhal::NotifySocket.new(File.join(@dir, "notify.sock"))
    @list = Array.new(2) { |nr| Narwhal::Worker.new(nr).tap { |w| w.pid = 300 + nr } }
    @workers = Workers.new(@list)
    @master = master
  end

  def teardown
    @master.instance_variable_get(:@listener_set).close
    @notify.close
    FileUtils.rm_rf(@dir)
  end

  def master
    config = Narwhal::Configurator.new
    config.settings[:logger] = @logger
    listeners = Narwhal::Listener::Set.new(@logger)
    listeners.listen(File.join(@dir, "app.sock"))
    Narwhal::Master.allocate.tap do |m|
      { config: config, logger: @logger, worker_processes: 2, listener_set: listeners, let_go_w: IO.pipe.last,
        shutdown: Narwhal::Master::Shutdown.new, reexec: Narwhal::Master::Reexec.new(@logger),
        notify: Narwhal::Master::SystemdNotify.new(@logger, { "NOTIFY_SOCKET" => @notify.path }),
        workers: @workers, control: nil, daemon: nil, successor: nil, handoff: nil, probation: nil }
        .each { |name, value| m.instance_variable_set(:"@#{name}", value) }
    end
  end

  # The old master after USR2: a successor pid=4242 whose end of the
  # channel the test holds.
  def upgrading(deadline: nil)
    reader, writer = IO.pipe
    terms = { "deadline" => deadline, "timeout" => deadline && 30 }
    @new_master = Upgrade::Channel.new(nil, writer, terms)
    @master.instance_variable_get(:@reexec).instance_variable_set(:@pid, 4242)
    successor = Upgrade::Successor.new(4242, Upgrade::Channel.new(reader, nil, terms), 2, @logger)
    @master.instance_variable_set(:@successor, successor)
  end

  # The old master's loop pass, as far as the upgrade goes.
  def pass
    @master.send(:follow_successor)
    @workers.retire_beyond(@master.worker_processes) unless @master.draining?
  end

  def signal(sig)
    @master.send(:handle_signal, sig)
  end

  # The example config's before_fork (TTOU, QUIT to the old master) does
  # not touch it before the verdict; once ready, the QUIT is acted on.
  def test_with_upgrade_timeout_quit_and_ttou_wait_for_the_successor
    upgrading(deadline: Narwhal::Clock.now + 30)
    signal("TTOU")
    signal("QUIT")
    assert_empty @workers.signals
    assert_equal 2, @master.worker_processes
    refute @master.draining?
    @new_master.tell(:serving)
    pass
    assert @master.successor_serving?, "/ready: the successor serves"
    @new_master.tell(:ready)
    pass
    assert_includes @log.string, "upgrade succeeded: the new master pid=4242 serves with all its workers\n"
    assert_equal 1, @master.worker_processes, "the TTOU, as it came"
    assert_equal [[0, :QUIT], [1, :QUIT]], @workers.signals, "then the QUIT"
    assert @master.draining?
    assert_equal "serving, worker_processes 1", @notify.next_message.fields["STATUS"]
    assert_match(/MAINPID=4242\nSTATUS=handed over to the new master pid=4242/, @notify.next_message.text)
  end

  # Without upgrade_timeout the old master does what it is told, as in
  # Unicorn; when the successor fails, the workers TTOU took come back.
  def test_a_successor_that_gives_up_gets_back_what_it_took
    upgrading
    signal("TTOU")
    assert_equal 1, @master.worker_processes
    @new_master.tell(:failed, "0 of 2 workers ready within upgrade_timeout 30s")
    pass
    refute @master.successor_serving?
    assert_equal 2, @master.worker_processes
    assert_includes @log.string, "upgrade failed: the new master pid=4242 gave up: 0 of 2 workers ready within " \
                                 "upgrade_timeout 30s; the old master pid=#{Process.pid} serves on"
    assert_includes @log.string, "worker_processes back to 2, as before the upgrade"
    assert_equal "serving, worker_processes 1", @notify.next_message.fields["STATUS"], "TTOU's"
    message = @notify.next_message
    assert_equal [Process.pid.to_s, "1"], message.fields.values_at("MAINPID", "READY")
    assert_equal "serving, worker_processes 2; upgrade failed: the new master pid=4242 gave up: 0 of 2 workers " \
                 "ready within upgrade_timeout 30s", message.fields["STATUS"]
    @master.send(:successor_exited, Process::Status.allocate)
    assert_empty @notify.pending, "given back once: its exit after it gave up says nothing more"
    assert_nil @master.instance_variable_get(:@successor)
  end

  def test_what_was_held_back_is_dropped_when_the_successor_fails
    upgrading(deadline: Narwhal::Clock.now + 30)
    signal("QUIT")
    @new_master.tell(:failed, "no worker could boot")
    pass
    refute @master.draining?
    assert_empty @workers.signals
    assert_includes @log.string, "serves on (dropping the QUIT held back for it)"
  end

  # A new master stuck before its loop (a preloaded app that hangs) gives
  # no verdict: past the deadline and the grace it is killed.
  def test_a_successor_with_no_verdict_past_the_grace_is_killed
    upgrading(deadline: Narwhal::Clock.now - Upgrade::Successor::GRACE)
    stuck = Process.spawn("sleep", "30")
    successor = @master.instance_variable_get(:@successor)
    successor.instance_variable_set(:@pid, stuck)
    signal("QUIT")
    pass
    _, status = Process.wait2(stuck)
    assert_equal "KILL", Signal.signame(status.termsig)
    assert_includes @log.string, "upgrade failed: the new master pid=#{stuck} gave no verdict within upgrade_timeout " \
                                 "(30s, +10s); killed it; the old master pid=#{Process.pid} serves on (dropping the " \
                                 "QUIT held back for it)"
    refute @master.draining?
  ensure
    if stuck && !status
      Process.kill(:KILL, stuck)
      Process.wait(stuck)
    end
  end

  # upgrade_retire_old: one old worker at a time, then the old master stops.
  def test_retire_old_hands_over_one_worker_at_a_time
    @master.config.settings[:upgrade_retire_old] = true
    upgrading
    @new_master.tell(:ready)
    pass
    assert_equal [[1, :QUIT]], @workers.signals
    pass
    assert_equal 1, @master.worker_processes, "worker 1 still finishing"
    @workers.reap(@list.last)
    pass
    assert_equal 0, @master.worker_processes
    @workers.reap(@list.first)
    pass
    assert @master.draining?
    assert_includes @log.string, "upgrade: every old worker retired: stopping workers gracefully"
  end

  # The new master's side: past the deadline, workers not ready are
  # killed (they never took a connection), ready ones finish; exit 1.
  def test_a_new_master_past_its_deadline_gives_up
    reader, writer = IO.pipe
    old_master = Upgrade::Channel.new(reader, nil, {})
    terms = { "deadline" => Narwhal::Clock.now - 1, "timeout" => 5, "old_pid" => Process.ppid }
    probation = Upgrade::Probation.new(Upgrade::Channel.new(nil, writer, terms), @logger)
    @master.instance_variable_set(:@probation, probation)
    @list.first.ready = true
    @master.send(:judge_probation)
    assert_equal [[0, :QUIT], [1, :KILL]], @workers.signals
    assert_equal 1, @master.instance_variable_get(:@shutdown).exit_status
    assert_match(/upgrade failed: 1 of 2 workers ready within upgrade_timeout 5s \(not ready: worker=1 pid=301\); exiting, the old master pid=#{Process.ppid} serves on/, @log.string)
    assert_equal "failed", old_master.messages.first.first
    assert_empty @notify.pending, "neither READY=1 nor STOPPING=1: the unit is the old master's"
  end

  # An operator's QUIT to a new master on probation gives the upgrade up
  # (without a deadline, or with the old master gone, it is a plain stop).
  def test_a_stop_while_on_probation_gives_the_upgrade_up
    reader, writer = IO.pipe
    terms = { "old_pid" => Process.ppid, "deadline" => Narwhal::Clock.now + 30 }
    probation = Upgrade::Probation.new(Upgrade::Channel.new(nil, writer, terms), @logger)
    @master.instance_variable_set(:@probation, probation)
    signal("USR2")
    assert_includes @log.string, "USR2 ignored: this master's own upgrade is not settled yet"
    signal("QUIT")
    assert_includes @log.string, "upgrade failed: QUIT received; exiting, the old master pid=#{Process.ppid} serves on"
    assert_equal ["failed", "QUIT received"], Upgrade::Channel.new(reader, nil, {}).messages.first
    assert_empty @notify.pending
  end
end
