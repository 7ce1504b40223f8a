# frozen_string_literal: true

require "test_helper"
require "logger"
require "stringio"

# The new master as the old one follows it: what it said, the signals held
# back until the verdict (only with upgrade_timeout), and a master that
# says nothing past its deadline.
class MasterUpgradeSuccessorTest < Minitest::Test
  Channel = Narwhal::Master::Upgrade::Channel
  Successor = Narwhal::Master::Upgrade::Successor

  def setup
    @log = StringIO.new
  end

  # A successor whose channel the test writes as the new master would.
  def successor(deadline: nil)
    reader, writer = IO.pipe
    terms = { "deadline" => deadline, "timeout" => deadline && 30 }
    @new_master = Channel.new(nil, writer, terms)
    Successor.new(4242, Channel.new(reader, nil, terms), 3, Logger.new(@log))
  end

  def test_what_it_says_becomes_events_in_order
    s = successor
    assert_equal [], s.events(0)
    refute s.serving?
    @new_master.tell(:serving)
    assert_equal [[:serving]], s.events(0)
    assert s.serving?
    refute s.ready?
    @new_master.tell(:ready)
    @new_master.tell(:"something a later version says")
    assert_equal [[:ready]], s.events(0)
    assert s.ready?
    assert s.serving?
    assert_equal [3, 4242], [s.worker_processes, s.pid]
  end

  def test_a_failure_carries_its_reason_and_ends_serving
    s = successor
    @new_master.tell(:serving)
    @new_master.tell(:failed, "0 of 3 workers ready within upgrade_timeout 30s")
    assert_equal [[:serving], [:failed, "0 of 3 workers ready within upgrade_timeout 30s"]], s.events(0)
    refute s.serving?
  end

  # Without upgrade_timeout nothing waits: Unicorn's hand-over as it was.
  def test_without_a_deadline_nothing_is_held_back
    s = successor
    refute s.verdict_pending?
    refute s.hold_back("QUIT")
    assert_nil s.wait(0)
    assert_equal [], s.events(1e9), "never overdue"
  end

  def test_with_a_deadline_quit_ttou_and_winch_wait_for_the_verdict
    s = successor(deadline: 100.0)
    %w[TTOU QUIT WINCH].each { |sig| assert s.hold_back(sig), sig }
    %w[INT TERM USR1 HUP TTIN].each { |sig| refute s.hold_back(sig), sig }
    assert_equal %w[TTOU QUIT WINCH], s.held_back
    assert_includes @log.string, "QUIT held back: the new master pid=4242 is not ready yet (upgrade_timeout 30s); " \
                                 "acted on once it is, dropped if it fails"
    @new_master.tell(:serving)
    s.events(0)
    assert s.verdict_pending?, "one worker serving is no verdict"
    @new_master.tell(:ready)
    s.events(0)
    refute s.verdict_pending?
    refute s.hold_back("QUIT")
  end

  # It keeps the deadline itself; silence past it and the grace means it
  # is stuck (a preloaded app that hangs): overdue, once.
  def test_silence_past_the_deadline_and_the_grace_is_overdue_once
    s = successor(deadline: 100.0)
    assert_equal 100.0 + Successor::GRACE - 40, s.wait(40)
    assert_equal [], s.events(100.0 + Successor::GRACE - 0.1)
    assert_equal [[:overdue]], s.events(100.0 + Successor::GRACE)
    assert_equal [], s.events(1e9)
    refute s.verdict_pending?
    assert_nil s.wait(1e9)
  end

  def test_it_is_lost_once
    s = successor
    assert s.lose
    refute s.lose
  end
end
