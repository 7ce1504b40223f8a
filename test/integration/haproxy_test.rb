# frozen_string_literal: true

require "test_helper"
require "support/example_file"
require "support/client_loop"
require "support/kept_alive_clients"

# Behind a real haproxy running examples/haproxy.cfg (its port and socket
# path replaced by the test's): the health check finds narwhal up, and a
# client loop through haproxy sees only 200s across USR2 + QUIT of the old
# master.
class HaproxyTest < Minitest::Test
  include Narwhal::ClientLoop

  HAPROXY = ["/usr/sbin/haproxy", "haproxy"].find { |n| system("command -v #{n} >/dev/null 2>&1") }

  # counts haproxy's health checks in up.log
  APP = <<~'RU'
    run lambda { |env|
      File.write("up.log", "#{env['REQUEST_METHOD']} #{env['HTTP_HOST']}\n", mode: "a") if env["PATH_INFO"] == "/up"
      return [200, {}, ["queue_time=#{env['narwhal.queue_time'].inspect}"]] if env["PATH_INFO"] == "/queue"
      return [200, {}, [env["rack.input"].read]] if env["REQUEST_METHOD"] == "POST"
      sleep 60 if env["PATH_INFO"] == "/stuck"
      [200, { "content-type" => "text/plain" }, ["ok #{Process.pid}"]]
    }
  RU

  def setup
    flunk "haproxy is required (bin/setup installs it)" unless HAPROXY
    @dir = Dir.mktmpdir("narwhal-haproxy")
    @sock = File.join(@dir, "narwhal.sock")
    @pid_path = File.join(@dir, "narwhal.pid")
    @config = "worker_processes 2\npreload_app true\npid #{@pid_path.inspect}\n"
    @server = start_narwhal
    start_haproxy
  end

  def teardown
    @clients&.stop
    stop_haproxy
    @extra_pids&.each { |pid| Process.kill(:KILL, pid) rescue nil } # rubocop:disable Style/RescueModifier
    @server&.stop
    FileUtils.rm_rf(@dir)
  end

  def start_narwhal(config = @config)
    Narwhal::ServerProcess.start(app: APP, listen: @sock, workers: 2, config: config)
  end

  def stop_haproxy
    return unless @haproxy_pid

    Process.kill(:TERM, @haproxy_pid)
    Process.wait(@haproxy_pid)
    @haproxy_pid = nil
  end

  # more: replacements in the example beyond the test's port and socket.
  def start_haproxy(more = {})
    @port = TCPServer.new("127.0.0.1", 0).then { |s| s.addr[1].tap { s.close } }
    cfg = Narwhal::ExampleFile.write("haproxy.cfg", @dir,
                                     "bind :80" => "bind 127.0.0.1:#{@port}",
                                     "unix@/var/www/app/tmp/sockets/narwhal.sock" => "unix@#{@sock}",
                                     **more)
    @log = File.join(@dir, "haproxy.log")
    @haproxy_pid = Process.spawn(HAPROXY, "-f", cfg, "-db", out: @log, err: @log)
    # the first health check passes (a check runs at start-up) and a
    # request goes through
    wait_until(timeout: 15, message: "haproxy serving\n#{haproxy_log}") do
      if Process.wait(@haproxy_pid, Process::WNOHANG)
        @haproxy_pid = nil
        flunk "haproxy exited:\n#{haproxy_log}"
      end
      get == 200
    rescue SystemCallError
      false
    end
  end

  def haproxy_log
    File.exist?(@log) ? File.read(@log) : ""
  end

  def get(path = "/")
    sock = TCPSocket.new("127.0.0.1", @port)
    sock.write("GET #{path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
    response = sock.read
    @last_body = response.split("\r\n\r\n", 2)[1]
    response[%r{\AHTTP/1\.[01] (\d{3})}, 1].to_i
  ensure
    sock&.close
  end

  def assert_all_ok(statuses)
    bad = statuses.reject { |s| s == 200 }
    assert bad.empty?, "#{bad.size} of #{statuses.size} failed: #{bad.tally}\n#{haproxy_log}"
  end

  def test_the_health_check_reaches_narwhal
    up_log = File.join(@server.dir, "up.log")
    wait_until(timeout: 15, message: "haproxy's health check") { File.exist?(up_log) }
    assert_equal "GET localhost", File.readlines(up_log, chomp: true).first
    refute_match(%r{narwhal/narwhal is DOWN}, haproxy_log)
  end

  # X-Request-Start t=%[date(0,ms)] of the example
  def test_queue_time_from_haproxys_header_reaches_the_app
    assert_equal 200, get("/queue")
    assert_queue_time_reported(@last_body)
  end

  def test_usr2_and_quit_of_the_old_master_through_haproxy
    assert_all_ok(upgrade_under_load(workers: 2))
  end

  # haproxy keeps its connections to narwhal open (the example's
  # http-server-close removed); workers recycle every 20 requests under
  # kept-alive clients POSTing: haproxy answers none of them 502.
  def test_recycling_behind_haproxy_with_kept_alive_server_connections_loses_no_post
    stop_haproxy
    @server.stop
    @server = start_narwhal("#{@config}worker_max_requests 20, jitter: 0\n")
    start_haproxy("  option http-server-close\n" => "")
    # busier than the direct test: the proxy looks for a close before it
    # reuses a connection, so only a close at the instant of a request shows
    @clients = Narwhal::KeptAliveClients.new(count: 8, pause: 0.005) { TCPSocket.new("127.0.0.1", @port) }.start
    recycles = Integer(ENV.fetch("RECYCLES", 12))
    wait_until(timeout: 25 + (recycles * 2), message: "#{recycles} recycles") do
      @server.log.scan(/serves in place of worker=/).size >= recycles
    end
    results = @clients.stop
    assert_empty results.failed + results.lost, "#{results.ok} answered\n#{haproxy_log.lines.grep(/ 50\d /).first(5).join}"
    assert_operator results.ok, :>, 100
  end

  # 2 workers of 4 threads, haproxy keeping its connections to narwhal
  # open, 16 clients POSTing back to back; QUIT stops narwhal for good.
  # Every request haproxy passed on got its answer (no 502: a server that
  # reset or closed on a request); once narwhal is gone its connects are
  # refused and haproxy answers 503.
  def test_quit_under_load_with_threads_behind_haproxy_loses_no_request
    # haproxy masks most of what the direct test sees (it passes 19 runs in
    # 20), but the last worker still closes its listener with connections
    # arriving in it
    stop_haproxy
    @server.stop
    @server = start_narwhal("#{@config}threads 4\n")
    start_haproxy("  option http-server-close\n" => "")
    @clients = Narwhal::KeptAliveClients.new(count: 16, pause: 0) { TCPSocket.new("127.0.0.1", @port) }.start
    wait_until(timeout: 30, message: "requests through haproxy") { @clients.sent >= 500 }
    @server.signal(:QUIT)
    assert_equal 0, @server.wait_exit(timeout: 30).exitstatus, @server.log
    wait_until(timeout: 15, message: "requests after narwhal was gone") { refused_by_haproxy? }
    results = @clients.stop
    @clients = nil
    assert_empty results.lost, haproxy_log.lines.reject { |l| l.include?(" 200 ") }.first(10).join
    assert_operator results.ok, :>=, 400
    statuses = results.failed.map { |f| f[/\A\d+/] }.uniq
    assert_equal ["503"], statuses, "#{results.ok} answered\n#{haproxy_log.lines.grep(/ 50\d /).first(5).join}"
  end

  # A worker killed for `timeout` answers 504 first: haproxy passes the
  # 504 on, and its passive check of the connection (observe layer4, one
  # error marks the server down) sees an answer, not a reset, so the
  # instance stays in rotation.
  def test_a_request_past_timeout_is_a_504_through_haproxy_and_the_server_stays_up
    stop_haproxy
    @server.stop
    @server = start_narwhal("#{@config}timeout 2\n")
    start_haproxy("check\n" => "check observe layer4 error-limit 1 on-error mark-down\n")
    assert_equal 504, get("/stuck")
    assert_match(%r{ 504 .*"GET /stuck HTTP/1.1"}, wait_until(message: "haproxy's log line") { haproxy_log[/.* 504 .*/] })
    10.times { assert_equal 200, get, "the server stays in rotation" }
    refute_match(/is DOWN/, haproxy_log)
  end

  def refused_by_haproxy?
    haproxy_log.match?(/ 503 /)
  end
end
