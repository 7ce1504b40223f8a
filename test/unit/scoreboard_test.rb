# frozen_string_literal: true

require "test_helper"

# The shared-memory scoreboard through its Ruby API: what worker processes
# write is what the master reads.
class ScoreboardTest < Minitest::Test
  Scoreboard = Narwhal::Scoreboard

  def test_slots_are_shared_with_forked_children
    board = Scoreboard.new(4)
    assert_nil board.busy_for(2)
    pid = fork do
      board.thread_slot(2).request_started
      exit!(0)
    end
    Process.wait(pid)
    assert_kind_of Float, board.busy_for(2), "the child's start time is visible to the parent"
    board.thread_slot(2).request_finished
    assert_nil board.busy_for(2)
    assert_equal 1, board.requests(2)
    board.reset(2)
    assert_equal 0, board.requests(2)
    assert_equal 4, board.size
    assert_equal 1, board.threads
  end

  def test_the_master_reads_which_request_a_forked_worker_is_on
    board = Scoreboard.new(2, threads: 2)
    long = "/#{'a' * 300}"
    pid = fork do
      board.thread_slot(1, 0).request_started("GET", "/reports/42")
      board.thread_slot(1, 1).request_started("PROPPATCH-TOO-LONG-A-METHOD", long)
      exit!(0)
    end
    Process.wait(pid)
    first, second = board.snapshot(1).requests_in_flight.sort_by(&:thread)
    assert_equal ["GET", "/reports/42", "GET /reports/42"], [first.request_method, first.path, first.to_s]
    assert_operator first.seconds, :>=, 0.0
    assert_equal "PROPPATCH-TOO-LO", second.request_method, "cut at METHOD_BYTES"
    assert_equal "#{long[0, Scoreboard::PATH_BYTES]}...", second.path, "cut at PATH_BYTES, marked"
    assert_equal 2, board.snapshot(1).busy_threads

    board.thread_slot(1, 0).request_finished
    board.thread_slot(1, 0).request_started # no method or path given: empty, still busy
    assert_equal ["", ""], board.current_request(1, 0).values_at(1, 2)
    board.thread_slot(1, 0).request_finished
    assert_nil board.current_request(1, 0)
    assert_nil board.current_request(0, 0), "an idle slot has no request"
  end

  def test_request_paths_that_are_not_utf8_are_readable
    board = Scoreboard.new(1)
    board.thread_slot(0).request_started("GET", "/caf\xC3".b)
    assert_equal "/caf\uFFFD", board.snapshot(0).requests_in_flight.first.path
  end

  def test_request_durations_fill_the_histogram_of_their_worker
    board = Scoreboard.new(2, threads: 2)
    assert_equal [[0] * (Scoreboard::HISTOGRAM_BOUNDS.size + 1), 0.0], board.histogram(1, Scoreboard::REQUEST_DURATION)
    pid = fork do
      slot = board.thread_slot(1, 1)
      3.times { slot.tap { |s| s.request_started("GET", "/") }.request_finished }
      slot.request_started("GET", "/slow")
      sleep 0.03 # the one measured duration that must be long
      slot.request_finished
      exit!(0)
    end
    Process.wait(pid)
    buckets = cumulative(board, 1, Scoreboard::REQUEST_DURATION)
    assert_equal 4, buckets[Float::INFINITY]
    assert_equal 3, buckets[0.005], "fast requests land in the 5 ms bucket: microsecond precision"
    assert_equal 3, buckets[0.025], "the 30 ms request is above 25 ms"
    assert_equal 4, buckets[10.0]
    _, sum = board.histogram(1, Scoreboard::REQUEST_DURATION)
    assert_operator sum, :>=, 0.03
    assert_operator sum, :<, 5.0
    assert_equal 0, cumulative(board, 0, Scoreboard::REQUEST_DURATION)[Float::INFINITY], "worker 0 untouched"
    assert_equal 0, cumulative(board, 1, Scoreboard::QUEUE_TIME_HEADER)[Float::INFINITY], "durations are not queue times"
    board.reset(1)
    assert_equal 0, cumulative(board, 1, Scoreboard::REQUEST_DURATION)[Float::INFINITY], "reset clears it"
  end

  def test_queue_time_observes_seconds_into_the_worker_histogram_of_its_source
    board = Scoreboard.new(2, threads: 2)
    slot = board.thread_slot(1, 1)
    header = Scoreboard::QUEUE_TIME_HEADER
    assert slot.queue_time(0.0, header)
    assert slot.queue_time(0.005, header), "on the bound: in that bucket (le)"
    assert slot.queue_time(0.0051, header)
    assert slot.queue_time(0.3, header)
    assert slot.queue_time(2, header)
    assert slot.queue_time(60.0, header)
    [-0.001, Float::NAN, Float::INFINITY, nil, "0.2", 1e12].each do |bad|
      refute slot.queue_time(bad, header), "#{bad.inspect} is ignored"
    end
    buckets = cumulative(board, 1, header)
    assert_equal({ 0.005 => 2, 0.01 => 3, 0.025 => 3, 0.05 => 3, 0.1 => 3, 0.25 => 3, 0.5 => 4, 1.0 => 4,
                   2.5 => 5, 5.0 => 5, 10.0 => 5, Float::INFINITY => 6 }, buckets)
    _, sum = board.histogram(1, header)
    assert_in_delta 62.3101, sum, 1e-5
    assert slot.queue_time(0.2, Scoreboard::QUEUE_TIME_KERNEL)
    assert_equal 1, cumulative(board, 1, Scoreboard::QUEUE_TIME_KERNEL)[0.25]
    assert_equal 6, cumulative(board, 1, header)[Float::INFINITY], "the other source's is its own"
    assert_equal 0, cumulative(board, 1, Scoreboard::REQUEST_DURATION)[Float::INFINITY]
    assert_raises(IndexError) { board.histogram(1, 3) }
    assert_raises(ArgumentError) { slot.queue_time(0.1, Scoreboard::REQUEST_DURATION) }
  end

  # What the master reads of a request at timeout: its connection, whether
  # its response began (the slot's own mark, or the thread's for a
  # hijack), and the thread to ask for a backtrace.
  def test_a_request_in_flight_carries_its_connection_thread_and_response_mark
    board = Scoreboard.new(1, threads: 2)
    Thread.new do
      slot = board.thread_slot(0, 1)
      slot.bind_thread!
      slot.request_started("GET", "/ws", 17)
      Scoreboard::ThreadSlot.responding! # as a hijack marks it
    end.join
    slot = board.thread_slot(0, 0)
    slot.request_started("GET", "/x", 9)
    first, second = board.requests_in_flight(0).sort_by(&:thread)
    assert_equal [9, false, 0, 0], [first.fd, first.responding, first.tid, first.backtraces]
    assert_equal [17, true], [second.fd, second.responding]
    assert_operator second.tid, :>, 0
    slot.responding!
    assert board.requests_in_flight(0).find { |r| r.thread.zero? }.responding
    slot.request_finished
    slot.request_started("GET", "/y")
    assert_equal [-1, false], board.requests_in_flight(0).find { |r| r.thread.zero? }.then { |r| [r.fd, r.responding] },
                 "a new request starts unmarked"
    assert_equal 0, board.backtraces(0, 1)
  end

  # The thread's bound slot outlives every other reference to its
  # scoreboard: a hijack's responding! never writes into an unmapped one.
  def test_a_bound_slot_keeps_its_scoreboard_mapped
    seen = Thread.new do
      Scoreboard.new(1).thread_slot(0).tap(&:bind_thread!).request_started("GET", "/ws")
      3.times { GC.start(full_mark: true, immediate_sweep: true) }
      Array.new(4) { Scoreboard.new(1) } # the old mapping's pages taken again if it was let go
      Scoreboard::ThreadSlot.responding!
      Thread.current.thread_variable_get(:narwhal_thread_slot)
    end.value
    assert_kind_of Scoreboard::ThreadSlot, seen
  end

  def test_queue_time_allocates_nothing
    slot = Scoreboard.new(1).thread_slot(0)
    seconds = 0.012
    kind = Scoreboard::QUEUE_TIME_KERNEL
    slot.queue_time(seconds, kind)
    i = 0
    empty = GC.stat(:total_allocated_objects)
    before = GC.stat(:total_allocated_objects) # what reading GC.stat costs, counted out below
    empty = before - empty
    before = GC.stat(:total_allocated_objects)
    while i < 1000 # `while`, not a block: a block would count
      slot.queue_time(seconds, kind)
      i += 1
    end
    assert_equal empty, GC.stat(:total_allocated_objects) - before
  end

  def test_requests_started_with_their_names_allocate_nothing
    slot = Scoreboard.new(1).thread_slot(0)
    method = "GET"
    path = "/some/path"
    slot.request_started(method, path)
    slot.request_finished
    i = 0
    empty = GC.stat(:total_allocated_objects)
    before = GC.stat(:total_allocated_objects)
    empty = before - empty
    before = GC.stat(:total_allocated_objects)
    while i < 1000
      slot.request_started(method, path)
      slot.request_finished
      i += 1
    end
    assert_equal empty, GC.stat(:total_allocated_objects) - before
  end

  def test_a_worker_says_when_it_serves
    board = Scoreboard.new(2)
    refute board.serving?(1)
    pid = fork do
      board.worker_slot(1).serving = true
      exit!(0)
    end
    Process.wait(pid)
    assert board.serving?(1)
    assert board.snapshot(1).serving
    board.reset(1, 99)
    refute board.serving?(1), "a new process in the slot boots first"
  end

  def test_slot_bounds
    board = Scoreboard.new(2)
    assert_raises(IndexError) { board.thread_slot(2) }
    assert_raises(IndexError) { board.busy_for(-1) }
    assert_raises(ArgumentError) { Scoreboard.new(0) }
    assert_raises(ArgumentError) { Scoreboard.new(Scoreboard::MAX_SLOTS + 1) }
  end

  def test_slot_objects_are_checked_when_made
    board = Scoreboard.new(2, threads: 3)
    assert_raises(IndexError) { board.thread_slot(2) }
    assert_raises(IndexError) { board.thread_slot(-1, 0) }
    assert_raises(IndexError) { board.thread_slot(1, 3) }
    assert_raises(IndexError) { board.thread_slot(1, -1) }
    assert_raises(IndexError) { board.worker_slot(2) }
    assert_raises(IndexError) { board.worker_slot(1).thread(3) }
    assert_raises(IndexError) { board.worker_slot(1).count(Scoreboard::COUNTERS.size) }
    assert_raises(IndexError) { board.worker_slot(1).count(-1) }
    assert_raises(IndexError) { board.reset(2) }
    assert_raises(ArgumentError) { Scoreboard.new(1, threads: 0) }
    assert_raises(ArgumentError) { Scoreboard.new(1, threads: Scoreboard::MAX_THREADS + 1) }
    assert_equal Scoreboard::MAX_THREADS, Scoreboard.new(1, threads: Scoreboard::MAX_THREADS).threads
  end

  # They point into the mapping unchecked, so only the scoreboard makes them.
  def test_slot_objects_cannot_be_made_or_copied_from_ruby
    slot = Scoreboard.new(1).thread_slot(0)
    assert_raises(TypeError) { Scoreboard::ThreadSlot.new }
    assert_raises(TypeError) { Scoreboard::WorkerSlot.allocate }
    assert_raises(TypeError) { slot.dup }
  end

  def test_a_forked_worker_writes_through_slot_objects_and_the_master_reads
    board = Scoreboard.new(3, threads: 2)
    pid = fork do
      board.reset(1, Process.pid) # a worker claims its slot before serving
      worker = board.worker_slot(1)
      2.times { worker.count(Scoreboard::CONNECTIONS_ACCEPTED) }
      worker.count(Scoreboard::REQUESTS_REJECTED)
      worker.count(Scoreboard::APP_ERRORS)
      3.times { worker.count(Scoreboard::REQUEST_TIMEOUTS) }
      board.thread_slot(1, 0).tap(&:request_started).request_finished
      worker.thread(1).tap(&:request_started).tap(&:request_finished).request_started # still on its 2nd
      exit!(0)
    end
    _, status = Process.wait2(pid)
    assert status.success?, "child: #{status.inspect}"

    assert_equal 2, board.requests(1), "the sum over the worker's threads"
    assert_kind_of Float, board.busy_for(1)
    snapshot = board.snapshot(1)
    assert_equal 1, snapshot.nr
    assert_equal pid, snapshot.pid
    assert_equal 2, snapshot.requests
    assert_equal 1, snapshot.busy_threads
    assert_operator snapshot.longest_busy, :>=, 0.0
    assert_equal({ connections_accepted: 2, requests_rejected: 1, app_errors: 1, request_timeouts: 3,
                   requests_shed_queue: 0, connections_handed_off: 0 }, snapshot.counters)
    assert_equal 1, board.thread_slot(1, 1).requests
    assert_equal 1, board.worker_slot(1).counter(Scoreboard::APP_ERRORS)
    [0, 2].each do |nr|
      assert_equal idle_snapshot(nr), board.snapshot(nr), "worker #{nr}'s slot is untouched"
    end
  end

  def test_busy_for_is_the_longest_request_among_the_workers_threads
    board = Scoreboard.new(2, threads: 4)
    first, later, also_later = [1, 0, 3].map { |i| board.thread_slot(1, i) }
    first.request_started
    wait_until(message: "a request 0.2 s old") { first.busy_for.to_f >= 0.2 }
    later.request_started
    also_later.request_started

    oldest_before = first.busy_for
    longest = board.busy_for(1)
    assert_operator longest, :>=, oldest_before, "thread 1 started first; threads 0 and 3 later"
    assert_equal 3, board.snapshot(1).busy_threads
    assert_operator board.snapshot(1).longest_busy, :>=, longest
    assert_nil board.busy_for(0), "another worker's slot"

    first.request_finished
    assert_operator board.busy_for(1), :<, longest, "the oldest is done: the next oldest counts"
    later.request_finished
    also_later.request_finished
    assert_nil board.busy_for(1)
    assert_equal 3, board.requests(1)
  end

  def test_reset_clears_the_pid_the_counters_and_every_thread
    board = Scoreboard.new(2, threads: 2)
    [0, 1].each do |nr|
      board.reset(nr, 4000 + nr)
      worker = board.worker_slot(nr)
      Scoreboard::COUNTERS.each_index { |c| worker.count(c) }
      [0, 1].each { |i| worker.thread(i).tap(&:request_started).tap(&:request_finished).request_started }
    end

    board.reset(1)
    assert_equal idle_snapshot(1), board.snapshot(1)
    assert_nil board.busy_for(1)
    assert_equal 0, board.requests(1)
    other = board.snapshot(0)
    assert_equal [4000, 2, 2], [other.pid, other.requests, other.busy_threads], "worker 0 is untouched"
    assert_equal Scoreboard::COUNTERS.to_h { |name| [name, 1] }, other.counters

    board.reset(1, 4242)
    assert_equal idle_snapshot(1).tap { |s| s.pid = 4242 }, board.snapshot(1)
  end

  def test_the_header_describes_the_layout
    board = Scoreboard.new(3, threads: 2)
    header = board.header
    assert_equal Scoreboard::MAGIC, header[:magic]
    assert_equal Scoreboard::LAYOUT_VERSION, header[:version]
    assert_equal [3, 2, Scoreboard::COUNTERS.size], header.values_at(:workers, :threads, :counters)
    assert_equal header[:header_bytes] + (3 * header[:worker_bytes]), header[:total_bytes]
    assert_operator header[:threads_offset] + (2 * header[:thread_bytes]), :<=, header[:worker_bytes]
    # room for pid and the counters before the threads, and for a thread's two fields
    assert_operator header[:threads_offset], :>=, 8 * (1 + Scoreboard::COUNTERS.size)
    assert_operator header[:thread_bytes], :>=, 16 + 8 + Scoreboard::METHOD_BYTES + Scoreboard::PATH_BYTES
    assert_equal [3, Scoreboard::HISTOGRAM_BOUNDS.size], header.values_at(:histograms, :buckets)
    assert_equal 6, Scoreboard::LAYOUT_VERSION
    assert_equal 0x4E575342, Scoreboard::MAGIC
    assert_equal %i[connections_accepted requests_rejected app_errors request_timeouts requests_shed_queue
                    connections_handed_off], Scoreboard::COUNTERS
    assert_equal [0, 1, 2, 3, 4, 5], [Scoreboard::CONNECTIONS_ACCEPTED, Scoreboard::REQUESTS_REJECTED,
                                      Scoreboard::APP_ERRORS, Scoreboard::REQUEST_TIMEOUTS,
                                      Scoreboard::REQUESTS_SHED_QUEUE, Scoreboard::CONNECTIONS_HANDED_OFF]
    assert_equal 1, Scoreboard.new(1).header[:threads], "one thread per worker unless asked"
  end

  # A slot object holds the scoreboard, so the mapping outlives every other
  # reference to it. Run in a child: a slot into unmapped memory is a crash.
  def test_slot_objects_keep_the_mapping_alive
    pid = fork do
      thread, worker = orphan_slots
      GC.start(full_mark: true, immediate_sweep: true)
      GC.compact if GC.respond_to?(:compact)
      GC.start(full_mark: true, immediate_sweep: true)
      thread.request_started
      worker.count(Scoreboard::APP_ERRORS)
      busy = thread.busy_for
      thread.request_finished
      worker.thread(0).request_started
      exit!(busy.is_a?(Float) && thread.requests == 1 && worker.counter(Scoreboard::APP_ERRORS) == 1 ? 0 : 1)
    end
    _, status = Process.wait2(pid)
    assert status.success?, "slots used after GC: #{status.inspect}"
  end

  def test_the_calls_made_per_request_allocate_nothing
    board = Scoreboard.new(2, threads: 2)
    thread = board.thread_slot(1, 1)
    worker = board.worker_slot(1)
    counter = Scoreboard::CONNECTIONS_ACCEPTED
    calls = 1000
    # the first pass fills every call site's method cache (Ruby allocates
    # those lazily); the second one is measured
    allocated = [10, calls].map { |n| allocations { per_request(thread, worker, counter, n) } }.last
    assert_equal 0, allocated, "objects allocated by #{calls} request_started/request_finished/count"
    assert_equal calls + 10, board.requests(1)
    assert_equal calls + 10, worker.counter(counter)
  end

  def test_most_free_threads_counts_accepting_siblings_within_the_span_less_their_queues
    board = Scoreboard.new(4, threads: 3)
    assert_nil board.most_free_threads(0), "no sibling accepts yet"
    board.span = 3
    board.worker_slot(1).accepting = true
    board.worker_slot(3).accepting = true # beyond the span: not a worker
    assert_equal 3, board.most_free_threads(0)
    pid = fork do
      board.thread_slot(1, 0).request_started
      board.thread_slot(1, 2).request_started
      exit!(0)
    end
    Process.wait(pid)
    assert_equal 1, board.most_free_threads(0), "a forked sibling's busy threads are seen"
    board.worker_slot(1).queued = 3
    assert_equal(-2, board.most_free_threads(0), "its queued requests count against it")
    board.worker_slot(1).queued = 0
    assert_nil board.most_free_threads(1), "a worker never counts itself"
    board.worker_slot(2).accepting = true
    assert_equal 3, board.most_free_threads(0)
    board.worker_slot(2).accepting = false # stopping: it takes no more
    assert_equal 1, board.most_free_threads(0)
    board.reset(1)
    refute board.worker_slot(1).accepting?, "a reset slot does not accept"
    board.span = 1
    assert_equal 3, board.header[:worker_span], "the span never shrinks"
    assert_raises(IndexError) { board.span = 5 }
  end

  def test_fewest_connections_of_the_serving_siblings
    board = Scoreboard.new(4, threads: 2)
    board.span = 3
    assert_nil board.fewest_connections(0), "no sibling serves yet"
    board.worker_slot(1).serving = true
    board.worker_slot(2).serving = true
    board.worker_slot(3).serving = true # beyond the span: not a worker
    pid = fork do
      board.worker_slot(1).connections = 30
      board.worker_slot(2).connections = 12
      exit!(0)
    end
    Process.wait(pid)
    assert_equal 12, board.fewest_connections(0), "what a forked sibling wrote is seen, accepting or not"
    assert_equal 30, board.fewest_connections(2), "a worker never counts itself"
    board.worker_slot(2).stopping!
    assert_equal 30, board.fewest_connections(0), "one whose graceful stop began takes no crowd"
    board.worker_slot(2).let_go!
    assert_equal 30, board.fewest_connections(0), "one that let go of its listeners takes no crowd"
    board.reset(1)
    assert_nil board.fewest_connections(0)
  end

  # A reconnect may land in the queue of a sibling in graceful stop: its
  # listeners are open until it lets go of them.
  def test_a_sibling_listens_until_it_lets_go_stopping_or_not
    board = Scoreboard.new(2)
    board.span = 2
    board.reset(1, 4242)
    refute board.siblings_listening?(0), "still booting"
    board.worker_slot(1).serving = true
    assert board.siblings_listening?(0)
    board.worker_slot(1).stopping!
    assert board.siblings_listening?(0), "stopping: its listeners are open still"
    board.worker_slot(1).let_go!
    refute board.siblings_listening?(0)
  end

  # After a reload lowered `threads`, a worker runs fewer threads than its
  # slot has sub-slots: the others are no idle threads.
  def test_most_free_threads_counts_only_the_threads_a_sibling_runs
    board = Scoreboard.new(2, threads: 4)
    board.span = 2
    board.worker_slot(1).accepting = 2
    assert board.worker_slot(1).accepting?
    assert_equal 2, board.most_free_threads(0)
    board.thread_slot(1, 0).request_started
    board.thread_slot(1, 1).request_started
    assert_equal 0, board.most_free_threads(0), "both of its threads are busy"
    board.worker_slot(1).accepting = 0
    assert_nil board.most_free_threads(0), "0 threads: it accepts nothing"
    assert_raises(ArgumentError) { board.worker_slot(1).accepting = -1 }
  end

  private

  def allocations
    before = GC.stat(:total_allocated_objects)
    yield
    GC.stat(:total_allocated_objects) - before
  end

  # `while`, not `times`: the loop itself must not allocate
  def per_request(thread, worker, counter, calls)
    i = 0
    while i < calls
      worker.count(counter)
      thread.request_started
      thread.request_finished
      i += 1
    end
  end

  def orphan_slots
    board = Scoreboard.new(4, threads: 2)
    [board.thread_slot(3, 1), board.worker_slot(3)]
  end

  def idle_snapshot(nr)
    Scoreboard::Snapshot.new(nr: nr, pid: 0, requests: 0, busy_threads: 0, longest_busy: nil,
                             counters: Scoreboard::COUNTERS.to_h { |name| [name, 0] }, serving: false,
                             requests_in_flight: [])
  end

  # What each bucket holds, cumulative as Prometheus reads it: le => count.
  def cumulative(board, nr, kind)
    counts, = board.histogram(nr, kind)
    bounds = Scoreboard::HISTOGRAM_BOUNDS + [Float::INFINITY]
    total = 0
    bounds.zip(counts).to_h { |le, n| [le, total += n] }
  end
end
