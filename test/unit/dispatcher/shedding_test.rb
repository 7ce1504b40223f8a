# frozen_string_literal: true

require "test_helper"

# Narwhal::Dispatcher::Shedding over a real epoll set and scoreboard: a
# response is shed only while reports wait in this worker with no thread
# of it waiting, and a sibling has a thread waiting.
class DispatcherSheddingTest < Minitest::Test
  ONESHOT_READ = Narwhal::Poller::READ | Narwhal::Poller::ONESHOT

  def setup
    @board = Narwhal::Scoreboard.new(2, threads: 2)
    @board.span = 2
    @ours = Narwhal::Poller.new(true)  # worker 0's set
    @theirs = Narwhal::Poller.new(true) # worker 1's set
    sibling = @board.worker_slot(1)
    sibling.accepting = 2
    @theirs.publish_waiting(sibling)
    @pipes = []
    @shedding = Narwhal::Dispatcher::Shedding.new(@ours, @board, 0)
  end

  def teardown
    @sibling_waiter&.kill&.join
    [@ours, @theirs].each(&:close)
    @pipes.flatten.each { |io| io.close unless io.closed? }
  end

  def test_nothing_waits_here_nothing_is_shed
    sibling_waits
    refute @shedding.shed?
  end

  def test_a_report_waits_here_and_a_sibling_thread_waits_the_response_is_shed
    report_waiting_here
    refute @shedding.shed?, "no sibling thread waits yet: a reconnect would only queue again"
    sibling_waits
    assert @shedding.shed?
  end

  private

  # A readable descriptor in our set, armed, with no thread of ours waiting.
  def report_waiting_here
    r, w = IO.pipe
    @pipes << [r, w]
    w.write("x")
    @ours.add(r.fileno, ONESHOT_READ)
    wait_until(message: "the report pending") { @ours.pending? }
  end

  # One of the sibling's threads blocks in its epoll set (idle).
  def sibling_waits
    r, w = IO.pipe
    @pipes << [r, w]
    @theirs.add(r.fileno, ONESHOT_READ)
    @sibling_waiter = Thread.new { @theirs.wait(5, [], 1) }
    wait_until(message: "the sibling's thread waiting") { @board.most_waiting_threads(0) == 1 }
  end
end
