# frozen_string_literal: true

require "test_helper"

# term_graceful: TERM drains (the workers serve on for drain_delay while a
# load balancer takes the instance out), then stops as QUIT does. A second
# TERM or INT stops at once; QUIT ends the delay early.
class GracefulTermTest < Minitest::Test
  APP = <<~'RU'
    run lambda { |env|
      if env["PATH_INFO"] == "/slow"
        File.write("slow-started", "") # the server's directory: the test waits for it
        sleep 6 # past the tests' drain delay and signals
      end
      [200, { "content-type" => "text/plain" }, ["ok"]]
    }
  RU

  def start(config)
    @server = Narwhal::ServerProcess.start(app: APP, workers: 2,
                                           config: "worker_processes 2\nterm_graceful true\n#{config}")
  end

  def teardown
    @clients&.each(&:kill)
    @server&.stop
  end

  def now
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  # One request on a new connection: its status, or the error.
  def get(path = "/")
    sock = TCPSocket.new(@server.host, @server.port)
    sock.write("GET #{path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
    sock.read[%r{\AHTTP/1\.1 (\d{3})}, 1].to_i
  rescue SystemCallError, IOError => e
    e
  ensure
    sock&.close
  end

  # Clients sending requests on new connections until @stop; every
  # [status, time sent] goes to @seen.
  def client_loop(count)
    @seen = []
    @lock = Mutex.new
    @stop = false
    @clients = Array.new(count) do
      Thread.new do
        until @stop
          sent = now
          status = get
          @lock.synchronize { @seen << [status, sent] }
        end
      end
    end
  end

  def seen
    @lock.synchronize { @seen.dup }
  end

  def wait_for_slow_request
    wait_until(timeout: 15, message: "the slow request in the app") do
      File.exist?(File.join(@server.dir, "slow-started"))
    end
  end

  def wait_for_log(pattern, timeout: 15)
    wait_until(timeout: timeout, message: pattern.inspect) { @server.log.match?(pattern) }
  end

  def test_under_a_client_loop_nothing_fails_across_term_when_clients_stop_after_the_drain_delay
    start("drain_delay 4\n")
    kept = @server.connect
    kept.write("GET / HTTP/1.1\r\nHost: test\r\n\r\n")
    assert_equal 200, kept.read_response.status
    client_loop(3)
    wait_until(timeout: 15, message: "traffic") { seen.size >= 20 }

    term_at = now
    @server.signal(:TERM)
    wait_for_log(/TERM received: draining, serving for 4s \(drain_delay\), then stopping gracefully/)
    kept.write("GET / HTTP/1.1\r\nHost: test\r\n\r\n")
    assert_equal 200, kept.read_response.status, "kept-alive connections are served while draining"
    slow = Thread.new { get("/slow") } # in flight when the drain delay ends
    wait_for_slow_request
    wait_until(timeout: 15, message: "new connections served after TERM") do
      seen.count { |_, sent| sent > term_at } >= 10
    end
    refute_match(/stopping workers gracefully/, @server.log, "still draining")
    @stop = true # the load balancer took the instance out
    @clients.each { |t| t.join(15) }

    wait_for_log(/drain_delay over: stopping workers gracefully/)
    assert slow.alive?, "a request is in flight as the graceful stop begins"
    assert kept.closed?(timeout: 10), "the idle kept-alive connection is closed"
    assert_equal 200, slow.value, "the request in flight is finished"
    assert_equal 0, @server.wait_exit(timeout: 15).exitstatus
    statuses = seen.map(&:first)
    assert_equal [200], statuses.uniq, "no request failed (#{statuses.size} sent)"
    assert_operator now - term_at, :>=, 4, "the drain delay was served"
  end

  def test_a_second_term_or_an_int_during_the_drain_stops_at_once
    %i[TERM INT].each do |second|
      start("drain_delay 60\n")
      @server.signal(:TERM)
      wait_for_log(/TERM received: draining/)
      assert_equal 200, get, "still serving"
      @server.signal(second)
      wait_for_log(/#{second} received: stopping now/)
      assert_equal 0, @server.wait_exit(timeout: 15).exitstatus
      refute_match(/stopping workers gracefully/, @server.log)
      @server.stop
    end
  end

  def test_quit_during_the_drain_stops_gracefully_at_once_and_other_signals_wait
    start("drain_delay 60\n")
    @server.signal(:TERM)
    wait_for_log(/TERM received: draining/)
    @server.signal(:HUP)
    wait_for_log(/HUP ignored: draining/)
    slow = Thread.new { get("/slow") }
    wait_for_slow_request
    @server.signal(:QUIT)
    wait_for_log(/QUIT received: stopping workers gracefully/)
    assert_equal 200, slow.value, "the request in flight is finished"
    assert_equal 0, @server.wait_exit(timeout: 15).exitstatus
  end
end
