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

  ONESHOT_READ = Narwhal::Poller::READ | Narwhal::Poller::ONESHOT

  # Threads sharing the set: a report of a ONESHOT descriptor is the
  # claim of the one thread that took it, until it re-arms it.
  def test_a_oneshot_report_is_claimed_until_modify_gives_it_back
    poller = Narwhal::Poller.new
    r, w = IO.pipe
    ready = []
    poller.add(r.fileno, ONESHOT_READ)
    refute poller.owned?(r.fileno)
    w.write("x")
    assert_equal 1, poller.wait(1, ready, 1)
    assert poller.owned?(r.fileno)
    assert_equal 1, poller.owned
    refute poller.claim(r.fileno), "a thread has it"
    poller.modify(r.fileno, ONESHOT_READ)
    refute poller.owned?(r.fileno)
    assert_equal 0, poller.owned
    assert poller.claim(r.fileno), "nobody has it: the sweep may take it"
    assert_equal 0, poller.wait(0.01, ready), "a report of a descriptor another thread claimed is dropped"
    poller.delete(r.fileno)
    assert_equal 0, poller.owned, "let go of"
  ensure
    poller&.close
    r&.close
    w&.close
  end

  def test_a_reserved_descriptor_is_owned_and_added_by_its_first_modify
    poller = Narwhal::Poller.new
    r, w = IO.pipe
    ready = []
    w.write("x")
    poller.reserve(r.fileno)
    assert poller.owned?(r.fileno)
    assert_equal 0, poller.wait(0.01, ready), "not in the set yet"
    poller.modify(r.fileno, ONESHOT_READ)
    assert_equal 1, poller.wait(1, ready)
    assert_equal r.fileno, ready[0]
  ensure
    poller&.close
    r&.close
    w&.close
  end

  # A number let go and registered again (a closed connection's, reused)
  # is reported for its new registration.
  def test_a_number_registered_again_is_reported_for_its_new_registration
    poller = Narwhal::Poller.new
    r, w = IO.pipe
    ready = []
    w.write("x")
    poller.add(r.fileno, ONESHOT_READ)
    waiter = Thread.new { poller.wait(2, ready, 1) }
    wait_until(message: "the report taken") { poller.owned?(r.fileno) || !waiter.alive? }
    waiter.join
    poller.delete(r.fileno)
    poller.reserve(r.fileno) # the same number, a new registration
    stale = []
    poller.add(r.fileno, ONESHOT_READ) # reported again, with the new generation
    assert_equal 1, poller.wait(1, stale, 1)
    assert_equal r.fileno, stale[0]
  ensure
    poller&.close
    r&.close
    w&.close
  end

  def test_pending_and_waiting
    poller = Narwhal::Poller.new
    r, w = IO.pipe
    poller.add(r.fileno, ONESHOT_READ)
    refute poller.pending?
    assert_equal 0, poller.waiting
    waiter = Thread.new { poller.wait(5, [], 1) }
    wait_until(message: "a thread waiting") { poller.waiting == 1 }
    w.write("x")
    waiter.join
    assert_equal 0, poller.waiting
    poller.modify(r.fileno, ONESHOT_READ) # still readable: reported again, to nobody yet
    assert poller.pending?
  ensure
    poller&.close
    r&.close
    w&.close
  end

  # Siblings read a worker's idle threads, those blocked waiting for a
  # report, from its scoreboard slot.
  def test_threads_waiting_are_published_to_the_worker_slot
    board = Narwhal::Scoreboard.new(2, threads: 2)
    board.span = 2
    slot = board.worker_slot(0)
    slot.accepting = 2
    poller = Narwhal::Poller.new
    r, w = IO.pipe
    poller.add(r.fileno, ONESHOT_READ)
    poller.publish_waiting(slot)
    assert_equal 0, board.most_waiting_threads(1)
    waiter = Thread.new { poller.wait(5, [], 1) }
    wait_until(message: "the waiting thread published") { board.most_waiting_threads(1) == 1 }
    assert_equal 0, board.most_waiting_threads(0), "a worker never counts itself"
    w.write("x")
    waiter.join
    assert_equal 0, board.most_waiting_threads(1), "it took a report: no longer idle"
  ensure
    poller&.close
    r&.close
    w&.close
  end

  # Threads sharing the set (Poller.new(true)): the report the waiting
  # thread gets while another thread has the GVL and serves is taken over
  # by the serving thread when it asks for its next report (keep), instead
  # of waiting for the GVL to change hands.
  def test_a_serving_thread_takes_over_the_report_a_waiting_thread_got
    poller = Narwhal::Poller.new(true)
    first_r, first_w = IO.pipe
    second_r, second_w = IO.pipe
    poller.add(first_r.fileno, ONESHOT_READ)
    poller.add(second_r.fileno, ONESHOT_READ)
    first_w.write("x")
    assert_equal 1, poller.wait(1, [], 1), "this thread serves a first report"
    leader = Thread.new { ready = []; [poller.wait(5, ready, 1), ready.first] }
    wait_until(message: "the other thread waits in epoll_wait") { in_epoll_wait?(leader) }
    second_w.write_nonblock("x")
    # the GVL stays with this thread from here to its next report
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 5
    until poller.held == 1
      flunk "the waiting thread got no report" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
    end
    ready = []
    assert_equal [1, second_r.fileno], [poller.wait(5, ready, 1, true), ready.first]
    assert_equal [0, nil], leader.value, "the waiting thread has nothing left to run"
  ensure
    leader&.kill
    poller&.close
    [first_r, first_w, second_r, second_w].each { |io| io&.close }
  end

  private

  EPOLL_WAIT_SYSCALLS = [232, 281, 441].freeze # x86_64 epoll_wait, epoll_pwait, epoll_pwait2

  # The thread is blocked in the kernel in an epoll wait.
  def in_epoll_wait?(thread)
    number = File.read("/proc/self/task/#{thread.native_thread_id}/syscall").split.first.to_i
    EPOLL_WAIT_SYSCALLS.include?(number)
  rescue Errno::ENOENT
    false
  end
end
