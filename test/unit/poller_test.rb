# frozen_string_literal: true

require "test_helper"

# The worker's epoll set, through its Ruby API.
class PollerTest < Minitest::Test
  def test_poller_reports_ready_descriptors_and_times_out
    poller = Narwhal::Poller.new
    r, w = IO.pipe
    ready = []
    poller.add(r.fileno, Narwhal::Poller::READ)
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

  def test_oneshot_reports_once_until_modify_rearms
    poller = Narwhal::Poller.new
    r, w = IO.pipe
    ready = []
    poller.add(r.fileno, Narwhal::Poller::READ | Narwhal::Poller::ONESHOT)
    w.write("x")
    assert_equal 1, poller.wait(1, ready)
    assert_equal 0, poller.wait(0.01, ready), "still readable, but disarmed"
    poller.modify(r.fileno, Narwhal::Poller::READ | Narwhal::Poller::ONESHOT)
    assert_equal 1, poller.wait(1, ready)
  ensure
    poller&.close
    r&.close
    w&.close
  end

  def test_modify_switches_to_writability
    poller = Narwhal::Poller.new
    a, b = UNIXSocket.pair
    ready = []
    poller.add(a.fileno, Narwhal::Poller::READ)
    assert_equal 0, poller.wait(0.01, ready), "nothing to read"
    poller.modify(a.fileno, Narwhal::Poller::WRITE)
    assert_equal 1, poller.wait(1, ready)
    assert_equal a.fileno, ready[0]
  ensure
    poller&.close
    a&.close
    b&.close
  end
end
