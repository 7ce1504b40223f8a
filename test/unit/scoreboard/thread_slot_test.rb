# frozen_string_literal: true

require "test_helper"
require "weakref"

# Scoreboard::ThreadSlot#bind_thread! leaves the calling thread a pointer
# into the scoreboard's mapping (ThreadSlot.responding! for a hijack, the
# backtrace signal's handler write through it). The binding keeps that
# scoreboard alive: a Server built on a thread and then dropped (as
# test/unit/server/stopping_test.rb does on the main thread) used to let
# the GC unmap it, and the thread's next hijack wrote to unmapped memory.
class ScoreboardThreadSlotTest < Minitest::Test
  Scoreboard = Narwhal::Scoreboard

  # Binds this thread to a slot of a new scoreboard and keeps no reference
  # to either: a WeakRef to the scoreboard.
  def bind_and_forget
    board = Scoreboard.new(1)
    board.thread_slot(0).bind_thread!
    WeakRef.new(board)
  end

  # In a child, so that a write to an unmapped page ends the child, not
  # the suite.
  def test_a_bound_thread_keeps_its_scoreboard_mapped
    pid = fork do
      board = bind_and_forget
      4.times { GC.start(full_mark: true, immediate_sweep: true) }
      exit!(3) unless board.weakref_alive?
      Scoreboard::ThreadSlot.responding!
      exit!(0)
    end
    _, status = Process.wait2(pid)
    refute_equal 3, status.exitstatus, "the scoreboard was freed while this thread was bound to it"
    assert status.success?, "ThreadSlot.responding! after the GC: #{status.inspect}"
  end

  # Binding again lets the first scoreboard go.
  def test_binding_again_lets_the_last_scoreboard_go
    pid = fork do
      first = bind_and_forget
      second = Scoreboard.new(1)
      second.thread_slot(0).bind_thread!
      4.times { GC.start(full_mark: true, immediate_sweep: true) }
      Scoreboard::ThreadSlot.responding!
      exit!(first.weakref_alive? ? 3 : 0)
    end
    _, status = Process.wait2(pid)
    assert status.success?, "the first scoreboard still held: #{status.inspect}"
  end
end
