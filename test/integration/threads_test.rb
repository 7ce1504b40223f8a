# frozen_string_literal: true

require "test_helper"
require_relative "../support/threads_client"
require "digest"
require "socket"

# Request threads (`threads N`) with real processes: many kept-alive
# clients, pipelining, how many requests a worker takes on, which worker
# gets a new connection, shedding, and QUIT with requests in every state.
class ThreadsTest < Minitest::Test
  include ThreadsClient

  # Paths:
  #   /pid                  the worker's pid
  #   /fork                 forks, or says why it could not
  #   /big?n=N              N bytes of "x", streamed in 64 KiB chunks
  #   /echo?id=I&n=N        digest of the request body; a body of N bytes made from I
  #   /sleep?ms=M&id=I      sleeps, answers I
  #   /block/NAME           marks "started-NAME-THREAD-PID" in the server's directory,
  #                         then waits for "release-NAME" (20 s at most)
  APP = <<~'RUBY'
    # loaded before the threads start: Digest's lazy const_missing loading
    # of SHA256 is not thread-safe (an app with threads preloads, as here)
    require "digest/sha2"
    Rack::Utils # rack 2.2 loads it on first use otherwise
    def pattern(id, n) = ("<#{id}>" * (n / 3 + 1)).byteslice(0, n)
    def text(body, extra = {}) = [200, { "content-type" => "text/plain" }.merge(extra), [body]]
    run lambda { |env|
      query = Rack::Utils.parse_query(env["QUERY_STRING"])
      case env["PATH_INFO"]
      when "/pid" then text(Process.pid.to_s)
      when "/fork"
        begin
          Process.wait(fork { exit!(0) })
          text("forked")
        rescue => e
          text("#{e.class}: #{e.message}")
        end
      when "/echo"
        digest = Digest::SHA256.hexdigest(env["rack.input"].read)
        text(pattern(query["id"], query["n"].to_i), "x-digest" => digest, "x-thread" => Thread.current.name.to_s)
      when "/big"
        chunk = "x" * 65536
        [200, { "content-type" => "text/plain" }, Enumerator.new { |y| (query["n"].to_i / 65536).times { y << chunk } }]
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

  # The pids of the workers that started /block/NAME, one per request.
  def started(name)
    Dir.glob(File.join(@server.dir, "started-#{name}-*")).map { |f| Integer(f[/-(\d+)\z/, 1]) }
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
    assert_empty drained(failures), "server log: #{@server.log.lines.grep(/error/).first(5).join}"
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

  # Each trial starts with both workers idle, as the control listener sees
  # them: a worker takes its first request while the last trial's worker
  # may still be finishing its response, and a worker decides to leave new
  # connections to a sibling when its request starts; one that becomes
  # idle only after that is seen at the next sweep.
  def test_the_idle_worker_gets_the_second_request
    start(workers: 2, threads: 2, extra: "control_listen '127.0.0.1:0'\n")
    trials = 100
    elsewhere = trials.times.count do |i|
      wait_until(message: "trial #{i}: both workers idle") do
        @server.control_get("/metrics").include?(%(narwhal_threads{state="busy"} 0\n))
      end
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

  # Kept-alive clients that keep every thread busy must not keep others,
  # waiting in the listen queue, out for as long as they send.
  def test_kept_alive_clients_cannot_keep_new_connections_out
    start(workers: 1, threads: 2)
    stop_at = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 3
    first_answers = Queue.new
    Array.new(8) do
      Thread.new do
        t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        c = Narwhal::RawClient.new(TCPSocket.new(@server.host, @server.port))
        assert_equal 200, get(c, "/sleep?ms=20").status
        first_answers << Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
        get(c, "/sleep?ms=20") while Process.clock_gettime(Process::CLOCK_MONOTONIC) < stop_at
        c.close
      end
    end.each(&:join)
    waits = Array.new(first_answers.size) { first_answers.pop }
    assert_equal 8, waits.size
    assert_operator waits.max, :<, 1.0, "the longest a client waited for its first answer: #{waits.max.round(3)}s"
  end

  # keepalive_rebalance off: the last request waited too, which it would
  # let go of for that; here only the shedding of the one answered while
  # another waits is under test
  def test_a_worker_with_requests_waiting_sheds_them_to_an_idle_sibling
    start(workers: 2, threads: 2, extra: "keepalive_rebalance nil\n")
    on_a = []
    a_pid = nil
    60.times do
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
    waiting = "GET /pid HTTP/1.1\r\nHost: t\r\n\r\n"
    on_a[2].write(waiting) # waits: no thread of A is free
    on_a[3].write(waiting) # waits behind it
    wait_until(message: "both at the server, waiting for a thread") do
      [on_a[2], on_a[3]].all? { |c| unread_bytes(c) == waiting.bytesize }
    end
    release("a0")
    first = on_a[2].read_response(timeout: 10)
    last = on_a[3].read_response(timeout: 10)
    assert_equal [a_pid.to_s] * 2, [first.body, last.body]
    assert_equal "close", first["connection"], "answered while another request waited, a sibling idle"
    assert_nil last["connection"], "nothing waited behind the last one"
    release("a1")
  end

  # States: idle kept-alive, a response being sent from the spool to a
  # client not reading, in the app (both threads), queued behind them, and
  # a head half sent; all on connections the worker holds. The idle one,
  # and the one whose spooled response said keep-alive, stay open (their
  # keep-alive timeout has not passed): a request on them is answered, as
  # all the others, with connection: close.
  def test_quit_with_requests_in_every_state
    # time enough for the idle connection's keep-alive on a loaded machine
    start(workers: 1, threads: 2, extra: "keepalive_timeout 30\n")
    idle, writing, in_app, in_app2, queued, partial = Array.new(6) { client }
    [idle, writing, in_app, in_app2, queued, partial].each { |c| assert_equal 200, get(c, "/pid").status }
    writing.write("GET /big?n=#{20 * 1024 * 1024} HTTP/1.1\r\nHost: t\r\n\r\n")
    wait_until(message: "a response waiting for its reader") { unsent_bytes(writing).positive? }
    in_app.write("GET /block/q1 HTTP/1.1\r\nHost: t\r\n\r\n")
    in_app2.write("GET /block/q2 HTTP/1.1\r\nHost: t\r\n\r\n")
    wait_until(message: "two requests in the app") { started("q1").any? && started("q2").any? }
    queued.write("GET /pid HTTP/1.1\r\nHost: t\r\n\r\n")
    partial.write("GET /pid HTTP/1.1\r\nHost: t\r\n")
    # no thread is free to read them: they wait at the server
    wait_until(message: "both at the server") { [queued, partial].all? { |c| unread_bytes(c)&.positive? } }
    @server.signal(:QUIT)
    # responses keep their connections until the listeners are gone (a
    # reconnect would land in a queue about to be dropped)
    wait_until(message: "QUIT taken") { @server.log.include?("listeners let go of") }
    # its keep-alive timeout has not passed: a request may still come on it
    idle.write("GET /pid HTTP/1.1\r\nHost: t\r\n\r\n")
    partial.write("\r\n")
    release("q1")
    release("q2")
    [in_app, in_app2, queued, partial, idle].each do |c|
      r = c.read_response(timeout: 10)
      assert_equal 200, r.status
      assert_equal "close", r["connection"]
    end
    big = writing.read_response(timeout: 20)
    assert_equal 20 * 1024 * 1024, big.body.count("x"), "the spooled response is sent whole"
    # its head said keep-alive: the connection stays for the next request,
    # which is the last
    last = get(writing, "/pid")
    assert_equal [200, "close"], [last.status, last["connection"]]
    assert writing.closed?(timeout: 5)
    assert @server.wait_exit(timeout: 10).success?
  end

  def test_worker_connections_closes_the_oldest_idle_connection_for_a_new_one
    start(workers: 1, threads: 2, extra: "worker_connections 2\n")
    oldest, newer = Array.new(2) { client }
    [oldest, newer].each { |c| assert_equal 200, get(c, "/pid").status }
    assert_equal 200, get(client, "/pid").status, "a third connection is served"
    assert oldest.closed?(timeout: 5), "the oldest idle connection made room"
    assert_equal 200, get(newer, "/pid").status, "the newer one stays"
  end

  def test_usr1_and_ttou_with_requests_in_the_app
    port = TCPServer.open("127.0.0.1", 0) { |s| s.local_address.ip_port }
    @server = Narwhal::ServerProcess.new(app: APP, listen: "127.0.0.1:#{port}",
                                         config: "worker_processes 2\nthreads 2\nstderr_path 'narwhal.log'\n")
    log = File.join(@server.dir, "narwhal.log")
    wait_until(message: "two workers ready") { File.exist?(log) && File.read(log).scan(/ready pid/).size == 2 }
    # three: a worker of two threads cannot take them all, so each has one
    blocked = Array.new(3) { Narwhal::RawClient.new(TCPSocket.new("127.0.0.1", port)) }
    (@clients ||= []).concat(blocked)
    blocked.each { |c| c.write("GET /block/u HTTP/1.1\r\nHost: t\r\n\r\n") }
    wait_until(message: "requests in both workers") { started("u").size == 3 && started("u").uniq.size == 2 }
    File.rename(log, "#{log}.1")
    @server.signal(:USR1)
    wait_until(message: "both workers reopened their log while busy") do
      File.exist?(log) && File.read(log).scan(/-- : reopened 1 log file/).size == 2
    end
    @server.signal(:TTOU)
    wait_until(message: "worker 1 told to stop") { File.read(log).include?("QUIT received") }
    release("u")
    responses = blocked.map { |c| c.read_response(timeout: 10) }
    assert_equal [200] * 3, responses.map(&:status)
    retiring = File.read("#{log}.1")[/worker=1 ready pid=(\d+)/, 1] # TTOU retires the last worker
    closes = responses.select { |r| r["connection"] == "close" }.map(&:body)
    assert_equal [retiring] * started("u").count(Integer(retiring)), closes, "the retiring worker's responses close"
    wait_until(message: "one worker left") { @server.worker_pids.size == 1 }
  end

  def test_hup_cannot_raise_threads_beyond_what_the_master_started_with
    start(workers: 1, threads: 2)
    File.write(File.join(@server.dir, "narwhal.conf.rb"), "worker_processes 1\nthreads 4\n")
    @server.signal(:HUP)
    wait_until(message: "the reload refused") { @server.log.include?("keeping the running configuration") }
    assert_match(/threads 4 is more than the 2 this master started with; USR2 or a restart applies it/, @server.log)
    assert_equal 200, get(client, "/pid").status
  end

  def test_fork_is_refused_in_a_worker_with_threads_and_spawn_is_not
    start(workers: 1, threads: 2)
    assert_match(/\ANarwhal::ForkError: fork in a worker with request threads \(threads 2\)/, get(client, "/fork").body)
    @server.stop
    start(workers: 1, threads: 1)
    assert_equal "forked", get(client, "/fork").body
  end

  def test_soft_timeout_interrupts_one_thread_and_the_worker_is_replaced
    start(workers: 1, threads: 3, extra: "timeout 30\nsoft_timeout 0.5\n")
    first_pid = get(client, "/pid").body
    slow = client
    slow.write("GET /sleep?ms=5000&id=slow HTTP/1.1\r\nHost: t\r\n\r\n")
    quick = client
    quick.write("GET /sleep?ms=200&id=quick HTTP/1.1\r\nHost: t\r\n\r\n")
    assert_equal "quick", quick.read_response(timeout: 5).body, "the other thread's request is not interrupted"
    r = slow.read_response(timeout: 5)
    assert_equal [503, "close"], [r.status, r["connection"]]
    # replaced first: the new worker serves before the old one is told to go
    wait_until(timeout: 10, message: "the worker replaced") do
      @server.log.scan(/worker=\d+ ready pid=\d+/).size == 2 && !@server.worker_pids.include?(Integer(first_pid))
    end
    assert_match(%r{request timeout: GET /sleep ran \d+\.\d+s, past soft_timeout \(0\.5s\)}, @server.log)
    refute_equal first_pid, get(client, "/pid").body, "the worker retired and was replaced"
  end

  def test_timeout_kills_the_worker_and_counts_the_requests_dying_with_it
    start(workers: 1, threads: 3, extra: "timeout 1\n")
    stuck = Array.new(2) { client }
    stuck.each { |c| c.write("GET /sleep?ms=20000 HTTP/1.1\r\nHost: t\r\n\r\n") }
    wait_until(timeout: 10, message: "the kill") { @server.log.include?("killing") }
    assert_match(/worker=0 pid=\d+ timeout \(\d+\.\d+s > 1s\) on GET \/sleep, killing; 1 other request in flight dies with it/,
                 @server.log)
    stuck.each { |c| assert_equal 504, c.read_response(timeout: 5).status, "answered before the kill" }
    stuck.each { |c| assert c.closed?(timeout: 5) }
    assert_equal 200, get(client, "/pid").status, "a new worker serves"
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
