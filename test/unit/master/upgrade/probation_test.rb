# frozen_string_literal: true

require "test_helper"
require "logger"
require "stringio"

# A USR2-started master on probation: what it tells the old master, its
# verdict from its worker table and the clock, and what it asks of its
# workers while the verdict is pending.
class MasterUpgradeProbationTest < Minitest::Test
  Channel = Narwhal::Master::Upgrade::Channel
  Probation = Narwhal::Master::Upgrade::Probation

  # The worker table as the probation reads it.
  class Workers < Array
    attr_accessor :last_boot_error
  end

  Clock = Struct.new(:now)

  def setup
    @log = StringIO.new
    @clock = Clock.new(100.0)
    @workers = Workers.new(Array.new(2) { |nr| Narwhal::Worker.new(nr).tap { |w| w.pid = 200 + nr } })
  end

  def probation(terms)
    reader, writer = IO.pipe
    @old_master = Channel.new(reader, nil, {})
    Probation.new(Channel.new(nil, writer, { "started" => 99.0, "old_pid" => Process.ppid }.merge(terms)), Logger.new(@log),
                  clock: @clock)
  end

  def test_serving_then_ready_once_every_worker_serves
    p = probation("deadline" => 130.0, "timeout" => 30)
    assert p.withholds_ready?, "with a deadline systemd hears of it once it succeeded"
    p.serving
    @workers[0].ready = true
    assert_nil p.judge(@workers, 2)
    @workers[1].ready = true
    @clock.now = 101.5
    assert_equal :ready, p.judge(@workers, 2)
    refute p.pending?
    refute p.withholds_ready?
    assert_nil p.judge(@workers, 2), "one verdict"
    assert_equal [["serving", ""], ["ready", ""]], @old_master.messages
    assert_nil @old_master.reader, "its end closed after the verdict"
    assert_includes @log.string, "upgrade: all 2 workers ready, 2.5s after USR2; telling the old master pid=#{Process.ppid}"
  end

  def test_past_the_deadline_it_says_why
    p = probation("deadline" => 130.0, "timeout" => 30)
    @workers[0].ready = true
    @workers.last_boot_error = "config.ru:3: boom (RuntimeError)"
    @clock.now = 129.9
    assert_nil p.judge(@workers, 2)
    assert_equal 0.1.round(6), p.wait(129.9).round(6)
    @clock.now = 130.0
    reason = p.judge(@workers, 2)
    assert_equal "1 of 2 workers ready within upgrade_timeout 30s (not ready: worker=1 pid=201); " \
                 "last boot failure: config.ru:3: boom (RuntimeError)", reason
    assert p.pending?, "the master gives up (#fail), not the judge"
    p.fail(reason)
    refute p.pending?
    assert_equal [["failed", reason]], @old_master.messages
    p.fail("again")
    assert_equal [], @old_master.messages, "said once"
  end

  # Without upgrade_timeout it waits as long as it takes, and claims the
  # unit at its first worker, as before.
  def test_without_a_deadline_it_never_times_out
    p = probation("deadline" => nil, "timeout" => nil)
    refute p.withholds_ready?
    @clock.now = 1e9
    assert_nil p.judge(@workers, 2)
    assert_nil p.wait(1e9)
  end

  def test_workers_check_the_health_path_only_while_the_verdict_is_pending
    p = probation("deadline" => nil, "health_path" => "/up", "health_headers" => { "Host" => "a.example" })
    assert_equal "/up", p.health_check.path
    @workers.each { |w| w.ready = true }
    p.judge(@workers, 2)
    assert_nil p.health_check, "a worker forked later (a respawn) serves without it"
    assert_includes @log.string, "upgrade: all 2 workers ready, each answered GET /up with 200"
    assert_nil probation("deadline" => nil).health_check
  end

  # Its parent, the old master, died (INT, TERM): this master is the only
  # server left, and serves on whatever the deadline.
  def test_with_the_old_master_gone_it_serves_on_alone
    p = probation("deadline" => 130.0, "timeout" => 30, "old_pid" => Process.ppid + 1)
    @clock.now = 200.0
    assert_equal :ready, p.judge(@workers, 2)
    refute p.pending?
    assert_includes @log.string, "upgrade: the old master pid=#{Process.ppid + 1} is gone; this master serves on alone"
  end

  # A stop before the verdict gives the upgrade up only when there is one
  # to give up: a deadline, and an old master to serve on.
  def test_a_stop_gives_the_upgrade_up_only_with_a_deadline_and_an_old_master
    assert probation("deadline" => 130.0).stop_gives_up?
    refute probation("deadline" => nil).stop_gives_up?
    refute probation("deadline" => 130.0, "old_pid" => Process.ppid + 1).stop_gives_up?
  end

  def test_a_master_not_started_by_usr2_has_no_probation
    assert_nil Probation.take(Logger.new(@log), {})
  end
end
