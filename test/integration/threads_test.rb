# frozen_string_literal: true

require "test_helper"
require "digest"
require "socket"

# Request threads (`threads N`) with real processes: many kept-alive
# clients, pipelining, how many requests a worker takes on, which worker
# gets a new connection, shedding, and QUIT with requests in every state.
class ThreadsTest < Minitest::Test
  # Paths:
  #   /pid                  the worker's pid
  #   /echo?id=I&n=N        digest of the request body; a body of N bytes made from I
  #   /sleep?ms=M&id=I      sleeps, answers I
  #   /block/NAME           marks "started-NAME-THREAD-PID" in the server's directory,
  #                         then waits for "release-NAME" (20 s at most)
  APP = <<~'RUBY'
    require "digest"
    def pattern(id, n) = ("<#{id}>" * (n / 3 + 1)).byteslice(0, n)
    def text(body, extra = {}) = [200, { "content-type" => "text/plain" }.merge(extra), [body]]
    run lambda { |env|
      query = Rack::Utils.parse_query(env["QUERY_STRING"])
      case env["PATH_INFO"]
      when "/pid" then text(Process.pid.to_s)
      when "/echo"
        digest = Digest::SHA256.hexdigest(env["rack.input"].read)
        text(pattern(query["id"], query["n"].to_i), "x-digest" => digest, "x-thread" => Thread.current.name.to_s)
      when "/sleep"
        sleep(query["ms"].to_i / 1000.0)
        text(query["id"].to_s)
      when %r{\A/block/\w+\z}
        name = env["PATH_INFO"].delete_prefix("/block/") # not $1: the app's threads share this lambda's $~
        File.write("started-#{name}-#{Thread.current.object_id}-#{Process.pid}", "")
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 20
        sleep 0.005 until File.exist?("release-#{name}") || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
        text(Process.pid.to_s)
      else [404, { "content-type" => "text/plain" }, ["no\n"]]
      end
    }
  RUBY

  def start(workers:, threads:, extra: "")
    @server = Narwhal::ServerProcess.start(
      app: APP, workers: workers,
      config: "worker_processes #{workers}\nthreads #{threads}\n#{extra}"
    )
  end

  def teardown
    @clients&.each(&:close)
    @server&.stop
  end

  def client
    c = @server.connect
    (@clients ||= []) << c
    c
  end

  def get(c, path)
    c.write("GET #{path} HTTP/1.1\r\nHost: t\r\n\r\n")
    c.read_response(timeout: 20)
  end

  # The pids of the workers that started /block/NAME, one per request.
  def started(name)
    Dir.glob(File.join(@server.dir, "started-#{name}-*")).map { |f| Integer(f[/-(\d+)\z/, 1]) }
  end

  # Bytes the client sent that the server has not read yet (/proc/net/tcp:
  # rx_queue of the server's end of the connection).
  def unread_bytes(client)
    server_port = format("%04X", @server.port)
    client_port = format("%04X", client.sock.local_address.ip_port)
    File.foreach("/proc/net/tcp").each do |line|
      fields = line.split
      next unless fields[1].end_with?(":#{server_port}") && fields[2].end_with?(":#{client_port}")

      return Integer(fields[4].split(":").last, 16)
    end
    nil
  end

  def release(name)
    File.write(File.join(@server.dir, "release-#{name}"), "")
  end

  # Connections waiting in the listen queue (the kernel's accept backlog),
  # from /proc/net/tcp: rx_queue of the listening socket.
  def listen_queue
    port = format("%04X", @server.port)
    File.foreach("/proc/net/tcp").each do |line|
      fields = line.split
      return Integer(fields[4].split(":").last, 16) if fields[1].end_with?(":#{port}") && fields[3] == "0A"
    end
    nil
  end

  def test_thirty_two_keepalive_clients_get_every_response_intact
    start(workers: 2, threads: 8)
    sizes = [0, 10, 700, 16 * 1024, 100 * 1024]
    failures = Queue.new
    served = Queue.new
    clients = Array.new(32) do |t|
      Thread.new do
        c = nil
        rng = Random.new(t)
        313.times do |i|
          id = "#{t}-#{i}"
          big = (i % 100) == t % 100 # about one request in a hundred carries 1 MB each way
          body = pattern(id, big ? 1024 * 1024 : sizes.sample(random: rng))
          n = big ? 1024 * 1024 : sizes.sample(random: rng)
          chunked = rng.rand(2).zero?
          c ||= Narwhal::RawClient.new(TCPSocket.new(@server.host, @server.port))
          c.write(request(id, n, body, chunked))
          r = c.read_response(timeout: 30)
          c = c.close if r["connection"] == "close" # shed: the next request reconnects
          ok = r.status == 200 && r.body == pattern(id, n) && r["x-digest"] == Digest::SHA256.hexdigest(body)
          ok ? served << r["x-thread"] : failures << "#{id} (#{body.bytesize} bytes #{chunked ? 'chunked' : 'sized'}, " \
                                                     "#{n} back): #{r.status_line} #{r.body.bytesize} bytes " \
                                                     "#{r.body[0, 40].inspect} digest #{r['x-digest'] == Digest::SHA256.hexdigest(body)}"
        end
        c&.close
      rescue StandardError => e
        failures << "client #{t}: #{e.class}: #{e.message}"
      end
    end
    clients.each(&:join)
    assert_empty Array.new(failures.size) { failures.pop }
    assert_equal 32 * 313, served.size
    threads = Array.new(served.size) { served.pop }.uniq
    assert_operator threads.size, :>, 1, "requests ran on several threads: #{threads}"
  end

  def test_pipelined_requests_are_answered_in_order
    start(workers: 1, threads: 4)
    c = client
    c.write((1..8).map { |i| "GET /sleep?ms=#{(9 - i) * 10}&id=#{i} HTTP/1.1\r\nHost: t\r\n\r\n" }.join)
    assert_equal (1..8).map(&:to_s), Array.new(8) { c.read_response(timeout: 10).body }
  end

  def test_a_worker_takes_only_what_its_threads_can_serve_now
    start(workers: 2, threads: 3)
    clients = Array.new(8) { client }
    clients.each { |c| c.write("GET /block/cap HTTP/1.1\r\nHost: t\r\n\r\n") }
    wait_until(timeout: 15, message: "6 app calls") { started("cap").size == 6 }
    wait_until(timeout: 5, message: "2 connections in the listen queue") { listen_queue == 2 }
    # while both workers are full, the rest stays in the kernel
    hold_until = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 0.5
    while Process.clock_gettime(Process::CLOCK_MONOTONIC) < hold_until
      assert_equal 6, started("cap").size
      assert_equal 2, listen_queue
      sleep 0.05
    end
    assert_equal [3, 3], started("cap").tally.values.sort, "each worker runs as many as it has threads"
    release("cap")
    assert_equal [200] * 8, clients.map { |c| c.read_response(timeout: 20).status }
  end

  def test_the_idle_worker_gets_the_second_request
    start(workers: 2, threads: 2)
    trials = 100
    elsewhere = trials.times.count do |i|
      first = client
      first.write("GET /block/t#{i} HTTP/1.1\r\nHost: t\r\n\r\n")
      wait_until(timeout: 10, message: "trial #{i} in the app") { started("t#{i}").any? }
      second = client
      pid = get(second, "/pid").body.to_i
      release("t#{i}")
      assert_equal 200, first.read_response(timeout: 10).status
      [first, second].each(&:close)
      @clients.clear
      pid != started("t#{i}").first
    end
    assert_operator elsewhere, :>=, 95, "the idle worker served the second request in #{elsewhere} of #{trials}"
  end

  def test_a_busy_worker_holds_no_kept_alive_client_hostage
    start(workers: 2, threads: 4)
    slow = client
    slow.write("GET /sleep?ms=2000 HTTP/1.1\r\nHost: t\r\n\r\n")
    latencies = Queue.new
    stop_at = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 2
    Array.new(8) do
      Thread.new do
        c = nil
        while Process.clock_gettime(Process::CLOCK_MONOTONIC) < stop_at
          t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
          c ||= Narwhal::RawClient.new(TCPSocket.new(@server.host, @server.port))
          r = get(c, "/pid")
          latencies << [r.status, Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0]
          c = c.close if r["connection"] == "close"
        end
        c&.close
      end
    end.each(&:join)
    results = Array.new(latencies.size) { latencies.pop }
    assert_operator results.size, :>, 80
    assert_equal [200], results.map(&:first).uniq
    assert_operator results.map(&:last).max, :<, 0.25, "the slowest fast request"
    assert_equal 200, slow.read_response(timeout: 5).status
  end

  def test_one_worker_at_saturation_sheds_nothing
    start(workers: 1, threads: 2)
    closes = Queue.new
    Array.new(6) do
      Thread.new do
        c = Narwhal::RawClient.new(TCPSocket.new(@server.host, @server.port))
        20.times { closes << get(c, "/sleep?ms=5")["connection"] }
        closes << :eof if c.closed?(timeout: 0.05)
        c.close
      end
    end.each(&:join)
    values = Array.new(closes.size) { closes.pop }
    assert_equal 120, values.size, "every response, and no connection closed by the server"
    refute_includes values, "close"
  end

  def test_a_worker_with_requests_waiting_sheds_them_to_an_idle_sibling
    start(workers: 2, threads: 2)
    on_a = []
    a_pid = nil
    20.times do
      c = client
      pid = get(c, "/pid").body.to_i
      a_pid ||= pid
      on_a << c if pid == a_pid
      break if on_a.size == 4
    end
    assert_equal 4, on_a.size, "four kept-alive connections on one worker"
    on_a[0].write("GET /block/a0 HTTP/1.1\r\nHost: t\r\n\r\n")
    on_a[1].write("GET /block/a1 HTTP/1.1\r\nHost: t\r\n\r\n")
    wait_until(message: "both threads of A busy") { started("a0").any? && started("a1").any? }
    on_a[2].write("GET /pid HTTP/1.1\r\nHost: t\r\n\r\n") # queued
    on_a[3].write("GET /pid HTTP/1.1\r\nHost: t\r\n\r\n") # queued behind it
    release("a0")
    first = on_a[2].read_response(timeout: 10)
    last = on_a[3].read_response(timeout: 10)
    assert_equal [a_pid.to_s] * 2, [first.body, last.body]
    assert_equal "close", first["connection"], "answered while another request waited, a sibling idle"
    assert_nil last["connection"], "nothing waited behind the last one"
    release("a1")
  end

  # States: idle kept-alive, in the app (both threads), queued behind
  # them, and a head half sent; all on connections the worker holds.
  def test_quit_with_requests_in_every_state
    start(workers: 1, threads: 2)
    idle, in_app, in_app2, queued, partial = Array.new(5) { client }
    [idle, in_app, in_app2, queued, partial].each { |c| assert_equal 200, get(c, "/pid").status }
    in_app.write("GET /block/q1 HTTP/1.1\r\nHost: t\r\n\r\n")
    in_app2.write("GET /block/q2 HTTP/1.1\r\nHost: t\r\n\r\n")
    wait_until(message: "two requests in the app") { started("q1").any? && started("q2").any? }
    queued.write("GET /pid HTTP/1.1\r\nHost: t\r\n\r\n")
    partial.write("GET /pid HTTP/1.1\r\nHost: t\r\n")
    wait_until(message: "the server read what was sent") { [queued, partial].all? { |c| unread_bytes(c).zero? } }
    @server.signal(:QUIT)
    assert idle.closed?(timeout: 5), "the idle kept-alive connection is closed"
    partial.write("\r\n")
    release("q1")
    release("q2")
    [in_app, in_app2, queued, partial].each do |c|
      r = c.read_response(timeout: 10)
      assert_equal 200, r.status
      assert_equal "close", r["connection"]
    end
    assert @server.wait_exit(timeout: 10).success?
  end

  private

  def pattern(id, n) = ("<#{id}>" * (n / 3 + 1)).byteslice(0, n)

  def request(id, n, body, chunked)
    head = "POST /echo?id=#{id}&n=#{n} HTTP/1.1\r\nHost: t\r\n"
    return "#{head}Content-Length: #{body.bytesize}\r\n\r\n#{body}" unless chunked

    chunks = body.empty? ? "" : body.scan(/.{1,65536}/m).map { |part| "#{part.bytesize.to_s(16)}\r\n#{part}\r\n" }.join
    "#{head}Transfer-Encoding: chunked\r\n\r\n#{chunks}0\r\n\r\n"
  end
end
