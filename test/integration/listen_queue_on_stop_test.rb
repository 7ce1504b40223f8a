# frozen_string_literal: true

require "test_helper"
require "support/kept_alive_clients"

# QUIT and a graceful TERM with connections waiting in the listen queue
# (the kernel completed them, no worker took them yet): the workers serve
# them before they let go of the listening socket, so the kernel never
# resets them. Every app thread is held busy while they queue up.
class ListenQueueOnStopTest < Minitest::Test
  # /hold waits (in the app) until the test creates the file "release";
  # /busy takes 5 ms; a POST gets its body back.
  APP = <<~'RU'
    run lambda { |env|
      return [200, {}, [env["rack.input"].read]] if env["REQUEST_METHOD"] == "POST"
      sleep 0.005 if env["PATH_INFO"] == "/busy"
      if env["PATH_INFO"] == "/hold"
        File.write("held-#{Process.pid}-#{Thread.current.object_id}", "")
        sleep 0.01 until File.exist?("release")
      end
      [200, { "content-type" => "text/plain" }, ["ok"]]
    }
  RU

  def teardown
    @clients&.stop
    @sockets&.each { |s| s.close unless s.closed? }
    @server&.stop
  end

  def start(workers:, threads:, config: "")
    @server = Narwhal::ServerProcess.start(app: APP, lint: false, workers: workers,
                                           config: "worker_processes #{workers}\nthreads #{threads}\n#{config}")
    @sockets = []
  end

  def send_get(path)
    sock = TCPSocket.new(@server.host, @server.port)
    @sockets << sock
    sock.write("GET #{path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
    sock
  end

  def held
    Dir.glob(File.join(@server.dir, "held-*")).size
  end

  # What `ss` shows in the listening socket's Recv-Q: connections the
  # kernel completed and no worker accepted yet.
  def listen_queue
    line = `ss -Hltn sport = :#{@server.port}`.lines.first
    line ? line.split[1].to_i : 0
  end

  # The status of the response on sock (read to EOF: each asked for
  # connection: close), or what came instead of one.
  def status_of(sock, timeout: 30)
    response = +""
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    while (left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)).positive? && sock.wait_readable(left)
      chunk = sock.read_nonblock(65_536, exception: false)
      break if chunk.nil?

      response << chunk if chunk.is_a?(String)
    end
    response.empty? ? :no_response : response[%r{\AHTTP/1\.1 (\d{3})}, 1].to_i
  rescue SystemCallError, IOError => e
    e.class
  end

  # Every thread of every worker held in the app, `queued` connections in
  # the listen queue; the stop signal, then the held requests end: every
  # request, held or queued, gets its 200.
  def assert_queue_served_across(stop, workers:, threads:, queued:)
    busy = Array.new(workers * threads) { send_get("/hold") }
    wait_until(timeout: 20, message: "every thread busy") { held == workers * threads }
    waiting = Array.new(queued) { send_get("/") }
    wait_until(timeout: 20, message: "#{queued} connections in the listen queue") { listen_queue == queued }
    stop.call
    wait_until(timeout: 20, message: "stopping") { @server.log.include?("stopping workers gracefully") }
    File.write(File.join(@server.dir, "release"), "")
    statuses = (busy + waiting).map { |s| status_of(s) }
    assert_equal [200] * statuses.size, statuses, "held and queued requests all served\n#{@server.log}"
    assert_equal 0, @server.wait_exit(timeout: 30).exitstatus
  end

  def test_quit_with_one_thread_serves_the_listen_queue
    start(workers: 1, threads: 1)
    assert_queue_served_across(-> { @server.signal(:QUIT) }, workers: 1, threads: 1, queued: 5)
  end

  def test_quit_with_two_workers_of_four_threads_serves_the_listen_queue
    start(workers: 2, threads: 4)
    assert_queue_served_across(-> { @server.signal(:QUIT) }, workers: 2, threads: 4, queued: 16)
  end

  def test_graceful_term_serves_the_listen_queue
    start(workers: 2, threads: 2, config: "term_graceful true\ndrain_delay 0\n")
    assert_queue_served_across(-> { @server.signal(:TERM) }, workers: 2, threads: 2, queued: 8)
  end

  # Clients that keep connecting while the workers drain (the queue is
  # never empty: each request takes 5 ms, 16 clients wait): the drain
  # takes what was queued when it began, not every connection that
  # arrives after it, so QUIT ends at once rather than at graceful_timeout.
  def test_quit_under_steady_load_ends_without_a_kill
    start(workers: 1, threads: 1, config: "timeout 30\n")
    stop = false
    served = Queue.new
    clients = Array.new(16) do
      Thread.new do
        until stop
          begin
            sock = TCPSocket.new(@server.host, @server.port)
            sock.write("GET /busy HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
            served << 1 if status_of(sock, timeout: 5) == 200
          rescue SystemCallError, IOError
            nil # refused or reset once the listeners are gone
          ensure
            sock&.close
          end
        end
      end
    end
    wait_until(timeout: 20, message: "requests served under load") { served.size >= 100 }
    quit_at = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    @server.signal(:QUIT)
    status = @server.wait_exit(timeout: 20)
    took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - quit_at
    refute_includes @server.log, "killing", "a worker outlived its graceful stop"
    assert_equal 0, status.exitstatus, @server.log
    assert_operator took, :<, 10, "QUIT took #{took.round(1)}s under load"
  ensure
    stop = true
    clients&.each { |t| t.join(10) }
  end

  # 16 kept-alive clients POSTing back to back on 2 workers of 4 threads:
  # QUIT ends the server with every request sent answered, those on
  # kept-alive connections and those on connections waiting in the listen
  # queue. Once the listeners are gone a connect is refused, which loses
  # nothing: no request was sent.
  def test_quit_under_load_with_threads_loses_no_request
    # the last worker serves the listen queue one connection per pass and
    # closes its listener with connections still arriving in it
    start(workers: 2, threads: 4)
    @clients = Narwhal::KeptAliveClients.new(count: 16, pause: 0, refusals: true) do
      TCPSocket.new(@server.host, @server.port)
    end.start
    wait_until(timeout: 30, message: "requests served under load") { @clients.sent >= 500 }
    @server.signal(:QUIT)
    assert_equal 0, @server.wait_exit(timeout: 30).exitstatus, @server.log
    results = @clients.stop
    @clients = nil
    assert_empty results.lost, "requests sent and never answered (#{results.ok} answered)"
    assert_empty results.failed
    assert_operator results.refused, :>, 0, "the clients ran on after the server was gone"
  end
end
