# frozen_string_literal: true

require "test_helper"
require "logger"
require "stringio"

# The new master as the old one follows it: what it said, in order.
class MasterUpgradeSuccessorTest < Minitest::Test
  Channel = Narwhal::Master::Upgrade::Channel
  Successor = Narwhal::Master::Upgrade::Successor

  def setup
    @log = StringIO.new
  end

  # A successor whose channel the test writes as the new master would.
  def successor
    reader, writer = IO.pipe
    @new_master = Channel.new(nil, writer, {})
    Successor.new(4242, Channel.new(reader, nil, {}), Logger.new(@log))
  end

  def test_what_it_says_becomes_events_in_order
    s = successor
    assert_equal [], s.events
    refute s.serving?
    @new_master.tell(:serving)
    assert_equal [[:serving]], s.events
    assert s.serving?
    refute s.ready?
    @new_master.tell(:ready)
    @new_master.tell(:"something a later version says")
    assert_equal [[:ready]], s.events
    assert s.ready?
    assert s.serving?
    assert_equal 4242, s.pid
  end

  def test_a_failure_carries_its_reason_and_ends_serving
    s = successor
    @new_master.tell(:serving)
    @new_master.tell(:failed, "no worker could boot (3 attempts)")
    assert_equal [[:serving], [:failed, "no worker could boot (3 attempts)"]], s.events
    refute s.serving?
  end
end
