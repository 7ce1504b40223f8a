# frozen_string_literal: true

require "test_helper"
require_relative "../support/client_loop"
require_relative "../support/kept_alive_clients"

# Workers replaced for worker_memory_limit and worker_max_requests under a
# client loop: the replacement serves before the old worker is told to
# QUIT, so no request fails while they recycle.
class RecyclingTest < Minitest::Test
  include Narwhal::ClientLoop

  # Every request keeps 8 MB (written, so resident) for as long as its
  # worker lives, and answers with the worker's pid.
  APP = <<~'RU'
    KEPT = []
    run lambda { |env|
      KEPT << ("x" * 8_000_000) if env["PATH_INFO"] == "/leak"
      [200, { "content-type" => "text/plain" }, [Process.pid.to_s]]
    }
  RU

  def teardown
    @load && (@load[:stop] = true)
    @clients&.stop
    @server&.stop
  end

  # One request on a new connection; its status (the body, a pid, noted).
  def get
    sock = TCPSocket.new(@server.host, @server.port)
    sock.write("GET #{@path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
    response = sock.read
    @served << response.split("\r\n\r\n", 2)[1].to_i
    response[%r{\AHTTP/1\.1 (\d{3})}, 1].to_i
  ensure
    sock&.close
  end

  def start(config, path)
    @path = path
    @served = Queue.new
    @server = Narwhal::ServerProcess.start(app: APP, lint: false, workers: 2,
                                           config: "preload_app true\nworker_processes 2\n#{config}")
  end

  def served_pids
    Array.new(@served.size) { @served.pop }.uniq
  end

  # "worker=3 pid=... serves in place of worker=1 pid=...": [[new, old], ...]
  def hand_overs
    @server.log.scan(/worker=\d+ pid=(\d+) serves in place of worker=\d+ pid=(\d+): sending it QUIT/)
           .map { |pair| pair.map(&:to_i) }
  end

  # The old worker's QUIT comes after its replacement said it is ready,
  # and the old one is gone.
  def assert_replaced_first(new_pid, old_pid)
    quit = wait_until(timeout: 15, message: "pid #{old_pid} told to QUIT") do
      @server.log.index(/^.*##{old_pid}\]\s+INFO -- : QUIT received/)
    end
    ready = @server.log.index(/worker=\d+ ready pid=#{new_pid}\b/)
    assert ready && ready < quit, "pid #{new_pid} ready before pid #{old_pid} got QUIT:\n#{@server.log}"
    wait_until(timeout: 15, message: "pid #{old_pid} gone") { !@server.worker_pids.include?(old_pid) }
  end

  # Load from two clients until both workers there at the start were
  # handed over; no request may fail meanwhile. Returns their pids.
  def recycle_both_first_workers
    first = @server.worker_pids
    statuses = under_load(clients: 2, before: 4, after: 10) do
      wait_until(timeout: 60, message: "both first workers recycled") do
        (first - hand_overs.map(&:last)).empty?
      end
    end
    assert_equal [200], statuses.uniq, "no request failed (#{statuses.size} sent)"
    first
  end

  def test_workers_over_the_memory_limit_are_replaced_without_a_failed_request
    # the limit: the master's size now plus 64 MB, that is 8 or so requests
    start("worker_memory_limit Narwhal::System::ProcessMemory.rss(Process.pid) + 64 * 1024 * 1024, interval: 0.2\n", "/leak")
    first = recycle_both_first_workers
    assert_match(/WARN -- : worker=\d pid=#{first[0]} memory \d+\.\d MiB \(RSS\) > worker_memory_limit \d+\.\d MiB, recycling/,
                 @server.log)
    hand_overs.first(2).each { |new_pid, old_pid| assert_replaced_first(new_pid, old_pid) }
    assert_operator served_pids.size, :>, 2, "new workers served"
    assert_match(/worker=[23] pid=\d+ forked to replace worker=[01] pid=#{first[0]}/, @server.log)
  end

  def test_workers_past_their_request_limit_are_replaced_without_a_failed_request
    start("worker_max_requests 20, jitter: 10\n", "/")
    first = recycle_both_first_workers
    lines = @server.log.scan(/served (\d+) requests, worker_max_requests (\d+) \(20 \+ jitter (\d+)\), recycling/)
    refute_empty lines
    lines.each do |served, limit, jitter|
      assert_operator served.to_i, :>=, limit.to_i
      assert_equal limit.to_i, 20 + jitter.to_i
      assert_operator jitter.to_i, :<=, 10
    end
    hand_overs.first(2).each { |new_pid, old_pid| assert_replaced_first(new_pid, old_pid) }
    assert_operator served_pids.size, :>, 2, "new workers served"
  end

  # Without preload_app each worker loads the app: while "broken" exists
  # in the app's directory a new worker fails to boot.
  BREAKABLE = <<~'RU'
    raise "broken deploy" if File.exist?("broken")
    run lambda { |_env| [200, { "content-type" => "text/plain" }, [Process.pid.to_s]] }
  RU

  def test_a_replacement_that_fails_to_boot_leaves_the_old_worker_serving_until_one_boots
    @path = "/"
    @served = Queue.new
    @server = Narwhal::ServerProcess.start(app: BREAKABLE, lint: false,
                                           config: "worker_max_requests 5, jitter: 0\n")
    old = @server.worker_pids.first
    File.write(File.join(@server.dir, "broken"), "")
    statuses = Array.new(8) { get }
    wait_until(timeout: 15, message: "a replacement failed") { @server.log.include?("did not boot; trying again") }
    assert_match(/worker=1 pid=\d+ failed to boot: .*broken deploy/, @server.log)
    assert_match(/worker=0 pid=#{old} serves on: its replacement worker=1 pid=\d+ did not boot; trying again/,
                 @server.log)
    statuses.concat(Array.new(5) { get })
    assert_equal [old], served_pids, "the old worker serves on"

    File.delete(File.join(@server.dir, "broken"))
    new_pid = wait_until(timeout: 30, message: "a replacement that serves") { hand_overs.last&.first }
    assert_replaced_first(new_pid, old)
    statuses.concat(Array.new(3) { get })
    assert_equal [200], statuses.uniq
    assert_equal new_pid, served_pids.last
  end

  # Answers a POST with its body.
  ECHO = <<~'RU'
    run lambda { |env| [200, { "content-type" => "text/plain" }, [env["rack.input"].read]] }
  RU

  # Recycles counted from the master's log (RECYCLES=20 measures more).
  RECYCLES = Integer(ENV.fetch("RECYCLES", 6))

  # A retiring worker answers requests that reach its kept-alive
  # connections (with connection: close), never closes one under a request.
  def test_kept_alive_clients_posting_lose_no_request_across_recycles
    @server = Narwhal::ServerProcess.start(app: ECHO, lint: false, workers: 2,
                                           config: "preload_app true\nworker_processes 2\n" \
                                                   "worker_max_requests 20, jitter: 0\n")
    @clients = Narwhal::KeptAliveClients.new { TCPSocket.new(@server.host, @server.port) }.start
    wait_until(timeout: 25 + (RECYCLES * 2), message: "#{RECYCLES} recycles") { hand_overs.size >= RECYCLES }
    results = @clients.stop
    assert_empty results.lost, "requests sent on kept-alive connections got no response " \
                               "(#{results.ok} answered, #{hand_overs.size} recycles)"
    assert_empty results.failed
    assert_operator results.closes, :>, 0, "retiring workers closed connections with connection: close"
  end
end
