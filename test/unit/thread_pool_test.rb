# frozen_string_literal: true

require "test_helper"
require "logger"

# The pool dispatcher with fake connections, responders and reactor: FIFO
# order, what it counts as unclaimed, when it wakes the reactor, shedding,
# and what it gives back.
class ThreadPoolTest < Minitest::Test
  # Blocks in #respond until released; records the order of requests.
  class GatedResponder
    def initialize(log, gate)
      @log = log
      @gate = gate
    end

    def respond(request)
      @log << request.name
      raise request.raises if request.raises

      @gate.pop
      :keep
    end
  end

  FakeRequest = Struct.new(:name, :raises, :closed) do
    def close_connection
      self.closed = true
    end
  end

  # What the pool calls on a connection after the response.
  class FakeConnection
    attr_reader :request
    attr_accessor :first_in_line

    def initialize(name, raises: nil)
      @request = FakeRequest.new(name, raises, false)
    end

    def after_response(outcome) = outcome
    def continue = :keep
  end

  class FakeReactor
    attr_reader :resumed, :wakes

    def initialize
      @resumed = Queue.new
      @wakes = 0
    end

    def resume(connection, action)
      @resumed << [connection.request.name, action]
    end

    def wake
      @wakes += 1
    end

    def park(_connection); end
  end

  def setup
    @log = Queue.new
    @gate = Queue.new
    @board = Narwhal::Scoreboard.new(2, threads: 2)
    @reactor = FakeReactor.new
    responders = Array.new(2) { GatedResponder.new(@log, @gate) }
    @pool = Narwhal::ThreadPool.new(responders, @board, 0, Logger.new(File::NULL))
    @pool.start(@reactor)
    wait_until(message: "both threads idle") { @pool.unclaimed == 2 }
  end

  def teardown
    4.times { @gate << :go }
    @pool.stop(wait: false)
  end

  def test_requests_run_in_arrival_order_and_claim_threads
    conns = %w[a b c d].map { |n| FakeConnection.new(n) }
    conns.each { |c| assert_equal Narwhal::ThreadPool::QUEUED, @pool.dispatch(c.request, c) }
    wait_until(message: "two running") { @log.size == 2 }
    assert_equal %w[a b], Array.new(2) { @log.pop }.sort, "the two oldest run first (in either order)"
    assert_equal(-2, @pool.unclaimed, "two busy, two queued")
    # one answer at a time: the thread it frees takes the oldest queued
    # request (two freed at once would race to log theirs)
    @gate << :go
    wait_until(message: "the third started") { @log.size == 1 }
    @gate << :go
    wait_until(message: "the fourth started") { @log.size == 2 }
    2.times { @gate << :go }
    wait_until(message: "all answered") { @reactor.resumed.size == 4 }
    assert_equal %w[c d], Array.new(2) { @log.pop }
    assert_equal [%w[a keep], %w[b keep], %w[c keep], %w[d keep]],
                 Array.new(4) { @reactor.resumed.pop.map(&:to_s) }.sort
  end

  def test_an_answer_while_requests_still_queue_leaves_room_for_one_connection
    conns = Array.new(4) { |i| FakeConnection.new("q#{i}") }
    conns.each { |c| @pool.dispatch(c.request, c) }
    wait_until(message: "two running, two queued") { @log.size == 2 }
    refute @pool.room?, "nothing answered yet"
    @gate << :go
    wait_until(message: "room after an answer with requests still queued") { @pool.room? }
    @pool.take_room
    refute @pool.room?
  end

  def test_a_thread_freed_while_none_was_free_wakes_the_reactor
    2.times { |i| c = FakeConnection.new("r#{i}"); @pool.dispatch(c.request, c) }
    wait_until(message: "both busy") { @log.size == 2 }
    wakes = @reactor.wakes
    @gate << :go
    wait_until(message: "a wake-up") { @reactor.wakes > wakes }
    assert_equal 1, @pool.unclaimed
  end

  def test_a_request_taken_while_others_wait_is_shed_only_when_a_sibling_is_idle
    conns = Array.new(4) { |i| FakeConnection.new("s#{i}") }
    conns.each { |c| @pool.dispatch(c.request, c) }
    wait_until(message: "two running") { @log.size == 2 }
    refute conns[0].request.closed, "no idle sibling yet"
    @board.span = 2
    @board.worker_slot(1).accepting = true # a sibling with idle threads
    @gate << :go
    wait_until(message: "the third taken") { @log.size == 3 }
    assert conns[2].request.closed, "taken while the fourth waited, a sibling idle: Connection: close"
    3.times { @gate << :go }
    wait_until(message: "all answered") { @reactor.resumed.size == 4 }
    refute conns[3].request.closed, "nothing waited behind the last"
  end

  def test_a_request_that_raises_past_the_responder_closes_its_connection_and_the_thread_lives_on
    bad = FakeConnection.new("bad", raises: NoMemoryError.new("fake"))
    @pool.dispatch(bad.request, bad)
    assert_equal ["bad", :close], @reactor.resumed.pop
    wait_until(message: "the thread idle again") { @pool.unclaimed == 2 }
  end
end
