# frozen_string_literal: true

require "test_helper"
require "logger"
require "stringio"

# A USR2-started master on probation: what it tells the old master, and
# its verdict from its worker table.
class MasterUpgradeProbationTest < Minitest::Test
  Channel = Narwhal::Master::Upgrade::Channel
  Probation = Narwhal::Master::Upgrade::Probation

  Clock = Struct.new(:now)

  def setup
    @log = StringIO.new
    @clock = Clock.new(100.0)
    @workers = Array.new(2) { |nr| Narwhal::Worker.new(nr).tap { |w| w.pid = 200 + nr } }
  end

  def probation(terms = {})
    reader, writer = IO.pipe
    @old_master = Channel.new(reader, nil, {})
    Probation.new(Channel.new(nil, writer, { "started" => 99.0, "old_pid" => Process.ppid }.merge(terms)),
                  Logger.new(@log), clock: @clock)
  end

  def test_serving_then_ready_once_every_worker_serves
    p = probation
    p.serving
    @workers[0].ready = true
    assert_nil p.judge(@workers, 2)
    @workers[1].ready = true
    @clock.now = 101.5
    assert_equal :ready, p.judge(@workers, 2)
    refute p.pending?
    assert_nil p.judge(@workers, 2), "one verdict"
    assert_equal [["serving", ""], ["ready", ""]], @old_master.messages
    assert_nil @old_master.reader, "its end closed after the verdict"
    assert_includes @log.string, "upgrade: all 2 workers ready, 2.5s after USR2; telling the old master pid=#{Process.ppid}"
  end

  def test_giving_up_is_said_once
    p = probation
    p.fail("no worker could boot (3 attempts), exiting: config.ru:1: boom (RuntimeError)")
    refute p.pending?
    p.fail("again")
    assert_equal [["failed", "no worker could boot (3 attempts), exiting: config.ru:1: boom (RuntimeError)"]],
                 @old_master.messages
  end

  def test_a_master_not_started_by_usr2_has_no_probation
    assert_nil Probation.take(Logger.new(@log), {})
  end
end
