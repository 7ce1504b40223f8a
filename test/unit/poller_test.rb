# frozen_string_literal: true

require "test_helper"

# The worker's epoll set, through its Ruby API.
class PollerTest < Minitest::Test
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
end
