# frozen_string_literal: true

require "test_helper"

# 5,000 connections opened at once that never send a byte (idle clients,
# port scanners, a proxy's warm pool) cost the server a descriptor each:
# they must not keep a fast client out. Every fast request is answered,
# and no connection is left half-open in the kernel (SYN-RECV) or waiting
# in the listen queue because idle ones hold the room. (Of a burst this
# size the kernel may answer some handshakes with SYN cookies and queue
# them only once they send: a count of held connections would measure
# the kernel, not the server.)
class IdleConnectionsTest < Minitest::Test
  IDLE = 5_000
  FAST = 200
  # What the test process needs: the idle sockets and a margin for its own;
  # the server inherits the limit (each worker may hold every idle one).
  DESCRIPTORS = IDLE + 1_000
  FAST_TIMEOUT = 10 # seconds for one fast request, connect to last byte
  KEPT = 3_000 # kept-alive connections whose memory is measured
  IDLE_BYTES_MAX = 4_096 # a page: what a read buffer held for each costs at least

  APP = <<~'RU'
    run lambda { |env| [200, { "content-type" => "text/plain" }, ["fast"]] }
  RU

  def teardown
    @idle&.each(&:close)
    @server&.stop
  end

  def test_one_thread_one_worker
    assert_fast_client_served(workers: 1, threads: 1)
  end

  # With threads a connection accepted without its request claims a thread
  # for a moment (Dispatcher::AcceptGate::FRESH_GRACE), unless the listen queue is deep:
  # a crowd of idle connections must not be accepted at the pace of threads.
  def test_five_threads_one_worker
    assert_fast_client_served(workers: 1, threads: 5)
  end

  def test_one_thread_two_workers
    assert_fast_client_served(workers: 2, threads: 1)
  end

  def test_five_threads_two_workers
    assert_fast_client_served(workers: 2, threads: 5)
  end

  # At worker_connections, connections that never sent a byte are let go
  # of, the oldest first, to make room for new ones: silent ones cannot
  # hold the room while a client that sends waits in the listen queue.
  def test_at_worker_connections_the_oldest_silent_connection_makes_room
    assert_silent_ones_make_room(threads: 1)
  end

  def test_at_worker_connections_the_oldest_silent_connection_makes_room_with_threads
    assert_silent_ones_make_room(threads: 5)
  end

  # A kept-alive connection between requests holds its socket and a few
  # small objects, not a read buffer: the worker's memory grows by less
  # than IDLE_BYTES_MAX for each.
  def test_an_idle_kept_alive_connection_costs_no_read_buffer
    assert_idle_memory(threads: 1)
  end

  def test_an_idle_kept_alive_connection_costs_no_read_buffer_with_threads
    assert_idle_memory(threads: 5)
  end

  private

  def assert_idle_memory(threads:)
    ensure_descriptors(KEPT + 1_000)
    @server = Narwhal::ServerProcess.start(app: APP, lint: false,
                                           config: "threads #{threads}\nkeepalive_timeout 120\n")
    worker = @server.worker_pids.first
    @idle = kept_alive(200) # the worker's heap and the code paths warmed up
    @idle.each(&:close)
    before = rss(worker)
    @idle = kept_alive(KEPT)
    per_connection = (rss(worker) - before) / KEPT
    assert_operator per_connection, :<, IDLE_BYTES_MAX, "bytes of worker RSS per idle kept-alive connection"
  end

  # count connections, each answered once and left open
  def kept_alive(count)
    Array.new(count) do
      client = Narwhal::RawClient.new(TCPSocket.new(@server.host, @server.port))
      client.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
      assert_equal 200, client.read_response(timeout: FAST_TIMEOUT).status
      client.sock
    end
  end

  def rss(pid)
    File.read("/proc/#{pid}/status")[/^VmRSS:\s+(\d+) kB/, 1].to_i * 1024
  end

  def assert_silent_ones_make_room(threads:)
    # no deferred accept: the kernel queues them in the order they connect
    @server = Narwhal::ServerProcess.start(app: APP, lint: false, listen: nil,
                                           config: "listen '127.0.0.1:0', tcp_defer_accept: false\n" \
                                                   "threads #{threads}\nworker_connections 20\n" \
                                                   "client_header_timeout 120\n")
    @idle = Array.new(60) { TCPSocket.new(@server.host, @server.port) }
    wait_until(timeout: 20, message: "every handshake completed, the worker at its cap") do
      syn_recv.zero? && @server.connection_fds > 20
    end
    failures = fast_requests(5)
    assert_empty failures, "fast requests at the cap"
    closed = @idle.map { |s| s.wait_readable(0) && s.read_nonblock(1, exception: false).nil? }
    if threads == 1
      assert closed.first, "the oldest silent connection was closed"
    else
      # threads that accept at once register their connections in about,
      # not exactly, the kernel's order
      assert_operator closed.first(10).count(true), :>=, 8, "the oldest silent connections were closed: #{closed.first(10)}"
    end
    refute closed.last, "the newest silent connection is held"
  end

  # The header timeout outlasts the test, so that no idle connection is
  # let go of on its own while the fast client runs.
  def assert_fast_client_served(workers:, threads:)
    ensure_descriptors(DESCRIPTORS)
    @server = Narwhal::ServerProcess.start(
      app: APP, lint: false, workers: workers,
      config: "worker_processes #{workers}\nthreads #{threads}\nclient_header_timeout 120\n"
    )
    @idle = open_idle(IDLE)
    failures = fast_requests(FAST)
    assert_empty failures, "#{failures.size} of #{FAST} fast requests failed among #{IDLE} idle connections: " \
                           "#{failures.tally}"
    wait_until(timeout: 30, interval: 0.1, message: "no connection half-open or in the listen queue") do
      syn_recv.zero? && listen_queue.zero?
    end
  end

  # Raises the soft descriptor limit when it is short; the server started
  # after this inherits it.
  def ensure_descriptors(needed)
    soft, hard = Process.getrlimit(:NOFILE)
    return if soft >= needed

    skip "needs #{needed} descriptors, hard limit #{hard}" if hard < needed
    Process.setrlimit(:NOFILE, needed, hard)
  end

  # Connects without waiting for each handshake: all at once, as a burst.
  def open_idle(count)
    address = Socket.sockaddr_in(@server.port, @server.host)
    Array.new(count) do
      sock = Socket.new(:INET, :STREAM)
      sock.connect_nonblock(address, exception: false)
      sock
    end
  end

  # A new connection for each request; the failures, by kind.
  def fast_requests(count)
    Array.new(count) { fast_request }.compact
  end

  def fast_request
    sock = Socket.tcp(@server.host, @server.port, connect_timeout: FAST_TIMEOUT)
    client = Narwhal::RawClient.new(sock)
    client.write("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    response = client.read_response(timeout: FAST_TIMEOUT)
    response.status == 200 && response.body == "fast" ? nil : "status #{response.status}"
  rescue SystemCallError, IOError, Timeout::Error => e
    e.class.name
  ensure
    sock&.close
  end

  # Connections of the port the kernel has not completed (SYN-RECV).
  def syn_recv
    `ss -Htn state syn-recv sport = :#{@server.port}`.lines.size
  end

  # Completed connections no worker has accepted yet (Recv-Q of the listener).
  def listen_queue
    line = `ss -Hltn sport = :#{@server.port}`.lines.first
    line ? line.split[1].to_i : 0
  end
end
