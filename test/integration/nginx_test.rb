# frozen_string_literal: true

require "test_helper"
require "etc"
require "support/example_file"
require "support/client_loop"
require "support/kept_alive_clients"

# Behind a real nginx running examples/nginx.conf (its socket path, port and
# root replaced by the test's): a client loop through nginx sees no 5xx
# across USR2 + QUIT of the old master, TTIN/TTOU and kill -9 of an idle
# worker; a request past `timeout` is a 502 in nginx's log, answered with
# the example's error page, and the next one succeeds.
class NginxTest < Minitest::Test
  include Narwhal::ClientLoop

  NGINX = ["/usr/sbin/nginx", "nginx"].find { |n| system("command -v #{n} >/dev/null 2>&1") }

  ERROR_PAGE = "<h1>We're sorry, but something went wrong.</h1>\n"

  APP = <<~'RU'
    run lambda { |env|
      sleep 10 if env["PATH_INFO"] == "/hang"
      return [200, {}, ["queue_time=#{env['narwhal.queue_time'].inspect}"]] if env["PATH_INFO"] == "/queue"
      return [200, {}, [env["rack.input"].read]] if env["REQUEST_METHOD"] == "POST"
      [200, { "content-type" => "text/plain" }, ["ok #{Process.pid}"]]
    }
  RU

  def setup
    flunk "nginx is required (bin/setup installs it)" unless NGINX
    @dir = Dir.mktmpdir("narwhal-nginx")
    File.chmod(0o755, @dir)
    @sock = File.join(@dir, "narwhal.sock")
    @pid_path = File.join(@dir, "narwhal.pid")
    @server = start_narwhal
    start_nginx
  end

  def start_narwhal(more = "")
    Narwhal::ServerProcess.start(
      app: APP, listen: @sock, workers: 2,
      config: "worker_processes 2\npreload_app true\ntimeout 2\npid #{@pid_path.inspect}\n#{more}"
    )
  end

  def teardown
    @clients&.stop
    stop_nginx
    @extra_pids&.each { |pid| Process.kill(:KILL, pid) rescue nil } # rubocop:disable Style/RescueModifier
    @server&.stop
    FileUtils.rm_rf(@dir) if @dir
  end

  def stop_nginx
    return unless @nginx_pid

    Process.kill(:TERM, @nginx_pid)
    Process.wait(@nginx_pid)
    @nginx_pid = nil
  end

  # more: replacements in the example beyond the test's socket, port and root.
  def start_nginx(more = {})
    @port = TCPServer.new("127.0.0.1", 0).then { |s| s.addr[1].tap { s.close } }
    %w[logs client_body proxy fastcgi uwsgi scgi].each { |d| FileUtils.mkdir_p(File.join(@dir, "nginx", d)) }
    FileUtils.mkdir_p(File.join(@dir, "public"))
    File.write(File.join(@dir, "public", "500.html"), ERROR_PAGE)
    # examples/nginx.conf itself, with this test's socket, port and root
    site = Narwhal::ExampleFile.write("nginx.conf", File.join(@dir, "nginx"),
                                      "unix:/var/www/app/tmp/sockets/narwhal.sock" => "unix:#{@sock}",
                                      "listen 80 deferred;" => "listen 127.0.0.1:#{@port} deferred;",
                                      "root /var/www/app/public;" => "root #{@dir}/public;", **more)
    conf = File.join(@dir, "nginx", "main.conf")
    # what /etc/nginx/nginx.conf would be around it
    File.write(conf, <<~CONF)
      #{Process.uid.zero? ? 'user root root;' : ''}
      worker_processes 1;
      error_log #{@dir}/nginx/logs/error.log warn;
      pid #{@dir}/nginx/nginx.pid;
      events { worker_connections 256; }
      http {
        access_log #{@dir}/nginx/logs/access.log;
        client_body_temp_path #{@dir}/nginx/client_body;
        proxy_temp_path #{@dir}/nginx/proxy;
        fastcgi_temp_path #{@dir}/nginx/fastcgi;
        uwsgi_temp_path #{@dir}/nginx/uwsgi;
        scgi_temp_path #{@dir}/nginx/scgi;
        include #{site};
      }
    CONF
    log = File.join(@dir, "nginx", "logs", "stdout.log")
    @nginx_pid = Process.spawn(NGINX, "-p", File.join(@dir, "nginx"), "-c", conf, "-g", "daemon off;",
                               out: log, err: log)
    wait_until(timeout: 10, message: "nginx listening\n#{File.read(log) rescue ''}") do # rubocop:disable Style/RescueModifier
      if Process.wait(@nginx_pid, Process::WNOHANG)
        @nginx_pid = nil
        flunk "nginx exited:\n#{File.read(log)}"
      end
      TCPSocket.new("127.0.0.1", @port).close
      true
    rescue SystemCallError
      false
    end
  end

  def get(path = "/")
    sock = TCPSocket.new("127.0.0.1", @port)
    sock.write("GET #{path} HTTP/1.0\r\nHost: test\r\n\r\n")
    response = sock.read
    @last_body = response.split("\r\n\r\n", 2)[1]
    response[%r{\AHTTP/1\.[01] (\d{3})}, 1].to_i
  ensure
    sock&.close
  end

  def assert_all_ok(statuses)
    bad = statuses.reject { |s| s == 200 }
    assert bad.empty?, "#{bad.size} of #{statuses.size} failed: #{bad.tally}\n" \
                       "#{File.read(File.join(@dir, 'nginx/logs/error.log'))}"
  end

  def test_usr2_and_quit_of_the_old_master_through_nginx
    assert_all_ok(upgrade_under_load(workers: 2))
  end

  def test_ttin_ttou_and_kill_9_of_an_idle_worker_through_nginx
    statuses = under_load do |between_requests|
      @server.signal(:TTIN)
      wait_until(message: "3 workers") { @server.worker_pids.size == 3 }
      @server.signal(:TTOU)
      wait_until(message: "2 workers") { @server.worker_pids.size == 2 }
      # an idle worker: no request is in flight while the lock is held
      victim = nil
      between_requests.call do
        victim = @server.worker_pids.first
        Process.kill(:KILL, victim)
      end
      wait_until(message: "replacement") { !@server.worker_pids.include?(victim) && @server.worker_pids.size == 2 }
    end
    assert_all_ok(statuses)
  end

  # X-Request-Start "t=${msec}" of the example
  def test_queue_time_from_nginxs_header_reaches_the_app
    assert_equal 200, get("/queue")
    assert_queue_time_reported(@last_body)
  end

  # The worker killed for timeout answered first: nginx passes narwhal's
  # 504 on (a reset would have been nginx's own 502, its error_page).
  def test_a_request_past_timeout_is_narwhals_504_and_the_next_succeeds
    assert_equal 504, get("/hang")
    assert_equal "Gateway Timeout\n", @last_body, "narwhal's answer, not nginx's error_page"
    assert_match(%r{"GET /hang HTTP/1.0" 504}, File.read(File.join(@dir, "nginx/logs/access.log")))
    wait_until(message: "the kill's line") { @server.log.include?("killing") } # written after the answer
    assert_match(%r{timeout \(\d+\.\d+s > 2s\) on GET /hang, killing}, @server.log)
    assert_equal 200, get
  end

  # The example's upstream keep-alive lines turned on; workers recycle
  # every 20 requests under kept-alive clients POSTing: nginx answers none
  # of them 502.
  def test_recycling_behind_nginx_with_upstream_keepalive_loses_no_post
    stop_nginx
    @server.stop
    @server = start_narwhal("worker_max_requests 20, jitter: 0\n")
    start_nginx("# keepalive 32;" => "keepalive 32;", "# proxy_http_version 1.1;" => "proxy_http_version 1.1;",
                "# proxy_set_header Connection" => "proxy_set_header Connection",
                "# keepalive_timeout 4s;" => "keepalive_timeout 4s;")
    # busier than the direct test: the proxy looks for a close before it
    # reuses a connection, so only a close at the instant of a request shows
    @clients = Narwhal::KeptAliveClients.new(count: 8, pause: 0.005) { TCPSocket.new("127.0.0.1", @port) }.start
    recycles = Integer(ENV.fetch("RECYCLES", 12))
    wait_until(timeout: 25 + (recycles * 2), message: "#{recycles} recycles") do
      @server.log.scan(/serves in place of worker=/).size >= recycles
    end
    results = @clients.stop
    assert_empty results.failed + results.lost,
                 "#{results.ok} answered\n#{File.read(File.join(@dir, 'nginx/logs/error.log'))}"
    assert_operator results.ok, :>, 100
  end

  # 2 workers of 4 threads behind nginx's upstream keep-alive, 16 clients
  # POSTing back to back; QUIT stops narwhal for good. Every request nginx
  # passed on got its answer: its only errors are the connects refused
  # once narwhal was gone (and "no live upstreams" after them), never a
  # request reset or left unanswered.
  def test_quit_under_load_with_threads_behind_nginx_loses_no_request
    # the last worker serves the listen queue one connection per pass and
    # closes its listener with connections still arriving in it
    stop_nginx
    @server.stop
    @server = start_narwhal("threads 4\n")
    start_nginx("# keepalive 32;" => "keepalive 32;", "# proxy_http_version 1.1;" => "proxy_http_version 1.1;",
                "# proxy_set_header Connection" => "proxy_set_header Connection",
                "# keepalive_timeout 4s;" => "keepalive_timeout 4s;")
    @clients = Narwhal::KeptAliveClients.new(count: 16, pause: 0) { TCPSocket.new("127.0.0.1", @port) }.start
    wait_until(timeout: 30, message: "requests through nginx") { @clients.sent >= 500 }
    @server.signal(:QUIT)
    assert_equal 0, @server.wait_exit(timeout: 30).exitstatus, @server.log
    wait_until(timeout: 15, message: "requests after narwhal was gone") { upstream_errors.any? }
    results = @clients.stop
    @clients = nil
    lost = upstream_errors.grep_v(/connect\(\) to \S+ failed|no live upstreams/)
    assert_empty lost, "#{results.ok} answered"
    assert_empty results.lost
    assert_operator results.ok, :>=, 400
    assert_equal ["502"], results.failed.map { |f| f[/\A\d+/] }.uniq, "only what nginx answers for a refused connect"
  end

  def upstream_errors
    File.readlines(File.join(@dir, "nginx/logs/error.log")).grep(/\[(?:error|crit|alert)\]/)
  end
end
