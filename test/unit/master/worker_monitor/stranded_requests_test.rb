# frozen_string_literal: true

require "test_helper"
require "logger"

# StrandedRequests on a forked child standing for a timed-out worker: it is
# stopped, its request that had not begun responding gets 504, the one
# that had gets nothing more, a request that waited unread gets 503, and
# the counts go into the kill's TimeoutInfo.
class MasterWorkerMonitorStrandedRequestsTest < Minitest::Test
  Worker = Struct.new(:nr, :pid)
  Info = Narwhal::Master::WorkerMonitor::TimeoutInfo

  def setup
    @board = Narwhal::Scoreboard.new(1, threads: 2)
    @listener = TCPServer.new("127.0.0.1", 0)
    @log = StringIO.new
    @stranded = Narwhal::Master::WorkerMonitor::StrandedRequests.new(@board, Logger.new(@log), -> { [@listener.fileno] })
  end

  def teardown
    if @child
      Process.kill(:KILL, @child)
      Process.wait(@child)
    end
    @listener.close
  end

  def connection(bytes)
    client = TCPSocket.new("127.0.0.1", @listener.addr[1])
    client.write(bytes)
    [client, @listener.accept]
  end

  def test_504_to_the_unanswered_503_to_the_waiting_none_to_the_responding
    stuck, stuck_served = connection("GET /stuck HTTP/1.1\r\n\r\n")
    responding, responding_served = connection("GET /slow-body HTTP/1.1\r\n\r\n")
    waiting, waiting_served = connection("GET /waited HTTP/1.1\r\n\r\n")
    stuck_served.read_nonblock(100) # read, as a worker read them
    responding_served.read_nonblock(100)
    @child = fork do
      @board.thread_slot(0, 0).request_started("GET", "/stuck", stuck_served.fileno)
      @board.thread_slot(0, 1).tap { |s| s.request_started("GET", "/slow-body", responding_served.fileno) }.responding!
      sleep 30
    end
    [stuck_served, responding_served, waiting_served].each(&:close)
    wait_until(message: "the child's requests") { @board.requests_in_flight(0).size == 2 }
    info = Info.new(elapsed: 3.0, timeout: 2, other_requests: 1)
    @stranded.answer(Worker.new(0, @child), info)
    assert_equal "T", File.read("/proc/#{@child}/stat").split[2], "stopped"
    assert_equal [1, 1], [info.answered, info.answered_waiting]
    assert_match(%r{\AHTTP/1.1 504 Gateway Timeout\r\n.*connection: close\r\n}m, stuck.read)
    assert_match(%r{\AHTTP/1.1 503 Service Unavailable\r\n}, waiting.read)
    refute IO.select([responding], nil, nil, 0.1), "its own response is under way: nothing else"
    assert_match(/answered 504 to 1 request, 503 to 1 waiting\z/, info.to_s)
  ensure
    [stuck, responding, waiting].each { |c| c&.close }
  end

  def test_a_worker_that_cannot_be_reached_is_logged_and_left_to_the_kill
    info = Info.new(elapsed: 3.0, timeout: 2, other_requests: 0)
    @stranded.answer(Worker.new(0, 2**22 + 4321), info)
    assert_match(/worker=0 pid=\d+ clients not answered before the kill: no such process/, @log.string)
    assert_nil info.answered
    refute_match(/answered/, info.to_s)
  end
end
