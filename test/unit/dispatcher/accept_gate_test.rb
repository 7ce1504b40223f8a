# frozen_string_literal: true

require "test_helper"
require "socket"

# When a worker with request threads should be in the listeners' wait
# queue: with a real scoreboard (its own threads' sub-slots and its
# siblings') and a real listening socket for the waiting-connection checks.
class AcceptGateTest < Minitest::Test
  FakeConnection = Struct.new(:awaiting_first_request?)

  def setup
    @board = Narwhal::Scoreboard.new(2, threads: 4)
    @board.span = 2
    @listener = TCPServer.new("127.0.0.1", 0)
    @gate = Narwhal::Dispatcher::AcceptGate.new(4, @board, 0, [@listener])
    @now = 100.0
    @clients = []
  end

  def teardown
    @listener.close
    @clients.each(&:close)
  end

  def busy(nr, threads)
    threads.times { |i| @board.thread_slot(nr, i).request_started }
  end

  def connect(count)
    @clients.concat(Array.new(count) { TCPSocket.new("127.0.0.1", @listener.local_address.ip_port) })
  end

  # Crowded siblings share a crowd: each lets in up to a thread's worth
  # more than the sibling that holds fewest connections.
  def test_a_crowd_goes_to_the_worker_holding_fewest
    assert_equal Narwhal::Reactor::Acceptors::CROWD_MAX, @gate.crowd_room(40), "no sibling serves: all of it"
    @board.worker_slot(1).serving = true
    @board.worker_slot(1).connections = 10
    assert_equal 14, @gate.crowd_room(0)
    assert_equal 4, @gate.crowd_room(10), "as many as the sibling: a thread's worth more, then the sibling's turn"
    assert_equal 0, @gate.crowd_room(14), "that many more than the sibling: none"
    @board.worker_slot(1).stopping!
    assert_equal Narwhal::Reactor::Acceptors::CROWD_MAX, @gate.crowd_room(14),
                 "a sibling in graceful stop takes no share: it holds no crowd back"
    @board.worker_slot(1).serving = true
    @board.worker_slot(0).serving = true
    @gate.holding(7)
    sibling = Narwhal::Dispatcher::AcceptGate.new(4, @board, 1, [@listener])
    assert_equal 11, sibling.crowd_room(0), "the sibling reads what this one holds"
  end

  def test_all_threads_idle_is_open_and_needs_no_recheck
    assert @gate.open?(@now)
    assert_nil @gate.recheck_in
  end

  # A worker whose threads are all in the app waits nowhere: its listeners
  # may stay, and a waiting connection takes its turn when a thread is back.
  def test_every_thread_busy_stays_open_while_no_sibling_is_idler
    busy(0, 4)
    assert @gate.open?(@now)
    @board.worker_slot(1).accepting = 4
    refute @gate.open?(@now), "the sibling has idle threads"
  end

  def test_a_thread_about_to_serve_counts_as_busy
    @board.worker_slot(1).accepting = 4
    busy(1, 1) # the sibling: 3 idle
    assert @gate.open?(@now), "4 idle here"
    refute @gate.open?(@now, 2), "2 idle here once two threads start"
  end

  def test_a_fresh_connection_claims_a_thread_until_its_request_or_the_grace
    busy(0, 3)
    fresh = FakeConnection.new(true)
    @gate.accepted(fresh, @now)
    refute @gate.open?(@now), "the new connection's request is coming"
    fresh[:awaiting_first_request?] = false
    assert @gate.open?(@now)
    @gate.accepted(FakeConnection.new(true), @now)
    refute @gate.open?(@now)
    assert @gate.open?(@now + Narwhal::Dispatcher::AcceptGate::FRESH_GRACE), "the claim expires"
  end

  # Idle connections arriving in a crowd: holding them in the listen queue
  # would leave new ones in SYN once it overflows.
  def test_a_deep_listen_queue_opens_a_gate_that_claims_closed
    busy(0, 3)
    @gate.accepted(FakeConnection.new(true), @now)
    connect(Narwhal::Dispatcher::AcceptGate::QUEUE_VALVE - 1)
    refute @gate.open?(@now)
    connect(1)
    wait_until(message: "a deep listen queue opens the gate") { @gate.open?(@now) }
  end

  def test_an_idler_sibling_is_preferred_until_a_connection_waits_too_long
    busy(0, 2)
    assert @gate.open?(@now), "no sibling accepts"
    @board.worker_slot(1).accepting = 4 # 4 idle threads there
    refute @gate.open?(@now), "the sibling has more idle threads"
    assert_equal Narwhal::Dispatcher::AcceptGate::RECHECK, @gate.recheck_in
    connect(1)
    wait_until(message: "a connection in the listen queue") { IO.select([@listener], nil, nil, 0) }
    refute @gate.open?(@now), "waiting, but not long yet"
    assert @gate.open?(@now + Narwhal::Dispatcher::AcceptGate::PENDING_GRACE + 0.01), "the sibling does not take it: take it"
  end

  # With no claim and no sibling accepting, nothing can close the gate:
  # the acceptors skip it before each request.
  def test_with_no_claim_and_no_accepting_sibling_a_worker_is_alone
    busy(0, 2)
    assert @gate.alone?
    assert @gate.open?(@now)
    @board.worker_slot(1).accepting = 4
    refute @gate.alone?, "a sibling accepts"
    @board.worker_slot(1).accepting = 0
    @gate.accepted(FakeConnection.new(true), @now)
    refute @gate.alone?, "a connection claims a thread"
  end

  def test_a_sibling_as_idle_or_busier_does_not_defer
    busy(0, 2)
    @board.worker_slot(1).accepting = 4
    busy(1, 2)
    assert @gate.open?(@now), "2 idle here, 2 there"
    @board.thread_slot(1, 2).request_started
    assert @gate.open?(@now)
    assert_equal Narwhal::Dispatcher::AcceptGate::RECHECK, @gate.recheck_in, "a busy worker keeps looking at its siblings"
  end

  # Alone, a busy worker has nothing to look at again unless a claim may
  # expire: its idle threads sleep instead of waking to compete for the GVL.
  def test_alone_a_busy_worker_rechecks_only_for_claims
    alone = Narwhal::Dispatcher::AcceptGate.new(4, board = Narwhal::Scoreboard.new(1, threads: 4), 0, [@listener])
    board.thread_slot(0, 0).request_started
    assert alone.open?(@now)
    assert_nil alone.recheck_in
    alone.accepted(FakeConnection.new(true), @now)
    alone.open?(@now)
    assert_equal Narwhal::Dispatcher::AcceptGate::RECHECK, alone.recheck_in, "the claim expires unseen"
  end

  # A drain let go of the listeners while a sibling still accepts: the
  # gate must not fail on them (it was asked as each request started).
  def test_a_listener_let_go_of_does_not_fail_the_gate
    busy(0, 2)
    @board.worker_slot(1).accepting = 4
    @listener.close
    refute @gate.open?(@now, 1)
  end

  # The master's scoreboard has a slot for every worker there may be:
  # siblings are the workers that serve now.
  def test_siblings_are_the_other_workers_that_serve
    refute @gate.siblings?, "no other worker serves"
    @board.reset(1, Process.pid)
    @board.worker_slot(1).serving = true
    assert @gate.siblings?
    refute Narwhal::Dispatcher::AcceptGate.new(2, Narwhal::Scoreboard.new(1, threads: 2), 0, [@listener]).siblings?
  end

  def test_listening_tells_the_siblings_how_many_threads_may_take_a_connection
    @gate.listening(true)
    assert @board.worker_slot(0).accepting?
    @gate.listening(false)
    refute @board.worker_slot(0).accepting?
  end
end
