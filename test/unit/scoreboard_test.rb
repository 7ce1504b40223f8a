# frozen_string_literal: true

require "test_helper"

# The shared-memory scoreboard, through its Ruby API.
class ScoreboardTest < Minitest::Test
  def test_slots_are_shared_with_forked_children
    board = Narwhal::Scoreboard.new(4)
    assert_nil board.busy_for(2)
    pid = fork do
      board.request_started(2)
      exit!(0)
    end
    Process.wait(pid)
    assert_kind_of Float, board.busy_for(2), "the child's start time is visible to the parent"
    board.request_finished(2)
    assert_nil board.busy_for(2)
    assert_equal 1, board.requests(2)
    board.reset(2)
    assert_equal 0, board.requests(2)
    assert_equal 4, board.size
  end

  def test_slot_bounds
    board = Narwhal::Scoreboard.new(2)
    assert_raises(IndexError) { board.request_started(2) }
    assert_raises(IndexError) { board.busy_for(-1) }
    assert_raises(ArgumentError) { Narwhal::Scoreboard.new(0) }
    assert_raises(ArgumentError) { Narwhal::Scoreboard.new(Narwhal::Scoreboard::MAX_SLOTS + 1) }
  end
end
