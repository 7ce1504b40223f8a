# frozen_string_literal: true

require "test_helper"
require "socket"

# When a worker with request threads should be in the listeners' wait
# queue: with a fake pool, a real scoreboard for the siblings and a real
# listening socket for the waiting-connection check.
class AcceptGateTest < Minitest::Test
  FakePool = Struct.new(:size, :unclaimed, :room) do
    def room? = room

    def take_room
      self.room = false
    end
  end
  FakeConnection = Struct.new(:awaiting_first_request?, :first_in_line)

  def setup
    @pool = FakePool.new(4, 4, false)
    @board = Narwhal::Scoreboard.new(2, threads: 4)
    @board.span = 2
    @listener = TCPServer.new("127.0.0.1", 0)
    @gate = Narwhal::AcceptGate.new(@pool, @board, 0, [@listener])
    @now = 100.0
  end

  def teardown
    @listener.close
    @clients&.each(&:close)
  end

  def test_all_threads_idle_is_open_and_needs_no_recheck
    assert @gate.open?(@now)
    assert_nil @gate.recheck_in
  end

  def test_no_unclaimed_thread_is_closed
    @pool.unclaimed = 0
    refute @gate.open?(@now)
    @pool.unclaimed = -3 # busy, with requests queued
    refute @gate.open?(@now)
  end

  def test_at_capacity_an_answered_request_lets_one_waiting_connection_in
    @pool.unclaimed = -2 # all busy, two queued
    refute @gate.open?(@now)
    @pool.room = true
    assert @gate.open?(@now), "room left by an answer"
    let_in = FakeConnection.new(false)
    @gate.accepted(let_in)
    refute @pool.room, "the room is taken by the connection let in"
    assert let_in.first_in_line, "it waited: its first request goes first"
    refute @gate.open?(@now)
    @pool.room = true
    @board.worker_slot(1).accepting = 4 # a sibling with idle threads takes it instead
    refute @gate.open?(@now)
  end

  def test_a_fresh_connection_claims_a_thread_until_its_request_or_the_grace
    @pool.unclaimed = 1
    fresh = FakeConnection.new(true)
    @gate.accepted(fresh)
    refute @gate.open?(@now), "the new connection's request is coming"
    fresh[:awaiting_first_request?] = false
    assert @gate.open?(@now)
    other = FakeConnection.new(true)
    @gate.accepted(other)
    refute @gate.open?(Narwhal::Clock.now)
    assert @gate.open?(Narwhal::Clock.now + Narwhal::AcceptGate::FRESH_GRACE), "the claim expires"
  end

  def test_an_idler_sibling_is_preferred_until_a_connection_waits_too_long
    @pool.unclaimed = 2
    assert @gate.open?(@now), "no sibling accepts"
    @board.worker_slot(1).accepting = true # 4 idle threads there
    refute @gate.open?(@now), "the sibling has more idle threads"
    assert_equal Narwhal::AcceptGate::RECHECK, @gate.recheck_in
    (@clients = [TCPSocket.new("127.0.0.1", @listener.local_address.ip_port)])
    wait_until(message: "a connection in the listen queue") { IO.select([@listener], nil, nil, 0) }
    refute @gate.open?(@now), "waiting, but not long yet"
    assert @gate.open?(@now + Narwhal::AcceptGate::PENDING_GRACE + 0.01), "the sibling does not take it: take it"
  end

  def test_a_sibling_as_idle_or_busier_does_not_defer
    @pool.unclaimed = 2
    @board.worker_slot(1).accepting = true
    @board.thread_slot(1, 0).request_started
    @board.thread_slot(1, 1).request_started
    assert @gate.open?(@now), "2 idle here, 2 there"
    @board.thread_slot(1, 2).request_started
    assert @gate.open?(@now)
    assert_equal Narwhal::AcceptGate::RECHECK, @gate.recheck_in, "a busy worker keeps looking at its siblings"
  end
end
