# frozen_string_literal: true

require "test_helper"

# What passes between app threads and the reactor's loop.
class ReactorHandoffTest < Minitest::Test
  def setup
    @handoff = Narwhal::Reactor::Handoff.new
  end

  def teardown
    @handoff.close
  end

  def test_parked_until_given_back_or_let_go
    @handoff.park(:a)
    @handoff.park(:b)
    assert @handoff.parked?(:a)
    ran = false
    Thread.new { @handoff.give_back(:a) { ran = true } }.join
    assert ran
    refute @handoff.parked?(:a)
    @handoff.exclusively(:b) { nil }
    refute @handoff.parked?(:b)
  end

  def test_posted_answers_wake_the_loop_and_are_taken_once
    Thread.new { @handoff.post(:a, :close) }.join
    Thread.new { @handoff.post(:b, :release) }.join
    assert IO.select([@handoff.reader], nil, nil, 5), "the loop's pipe is readable"
    assert_equal [%i[a close], %i[b release]], @handoff.take
    assert_empty @handoff.take
    refute IO.select([@handoff.reader], nil, nil, 0), "the wake-ups were read"
  end

  def test_the_lock_is_held_while_the_block_runs
    @handoff.park(:a)
    inside = Queue.new
    leave = Queue.new
    thread = Thread.new { @handoff.give_back(:a) { inside << true; leave.pop } }
    inside.pop
    checker = Thread.new { @handoff.parked?(:b) }
    refute checker.join(0.05), "another caller waits for the lock"
    leave << true
    [thread, checker].each(&:join)
  end

  def test_a_wake_after_close_is_ignored
    @handoff.close
    assert_nil @handoff.wake
    @handoff = Narwhal::Reactor::Handoff.new
  end
end
