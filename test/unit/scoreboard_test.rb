# frozen_string_literal: true

require "test_helper"

# The shared-memory scoreboard and the epoll set, through their Ruby API.
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

  def test_poller_reports_ready_descriptors_and_times_out
    poller = Narwhal::Poller.new
    r, w = IO.pipe
    ready = []
    poller.add(r.fileno, false)
    assert_equal 0, poller.wait(0.01, ready)
    w.write("x")
    assert_equal 1, poller.wait(1, ready)
    assert_equal r.fileno, ready[0]
    poller.delete(r.fileno)
    assert_equal 0, poller.wait(0.01, ready)
    poller.delete(r.fileno) # already gone: no error
    poller.close
    assert_raises(IOError) { poller.wait(0, ready) }
  ensure
    r&.close
    w&.close
  end

  def test_sendfile_nonblock_sends_a_file_range
    Tempfile.create("nw") do |f|
      f.write("0123456789")
      f.flush
      a, b = UNIXSocket.pair
      assert_equal 4, Narwhal.sendfile_nonblock(a.fileno, f.fileno, 3, 4)
      assert_equal "3456", b.read_nonblock(10)
      assert_equal 0, Narwhal.sendfile_nonblock(a.fileno, f.fileno, 10, 4), "0 at end of file"
    ensure
      a&.close
      b&.close
    end
  end
end
