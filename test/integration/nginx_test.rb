# frozen_string_literal: true

require "test_helper"
require "etc"
require "support/example_file"
require "support/client_loop"

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
      [200, { "content-type" => "text/plain" }, ["ok #{Process.pid}"]]
    }
  RU

  def setup
    flunk "nginx is required (bin/setup installs it)" unless NGINX
    @dir = Dir.mktmpdir("narwhal-nginx")
    File.chmod(0o755, @dir)
    @sock = File.join(@dir, "narwhal.sock")
    @pid_path = File.join(@dir, "narwhal.pid")
    @server = Narwhal::ServerProcess.start(
      app: APP, listen: @sock, workers: 2,
      config: "worker_processes 2\npreload_app true\ntimeout 2\npid #{@pid_path.inspect}\n"
    )
    start_nginx
  end

  def teardown
    Process.kill(:TERM, @nginx_pid) if @nginx_pid
    Process.wait(@nginx_pid) if @nginx_pid
    @extra_pids&.each { |pid| Process.kill(:KILL, pid) rescue nil } # rubocop:disable Style/RescueModifier
    @server&.stop
    FileUtils.rm_rf(@dir) if @dir
  end

  def start_nginx
    @port = TCPServer.new("127.0.0.1", 0).then { |s| s.addr[1].tap { s.close } }
    %w[logs client_body proxy fastcgi uwsgi scgi].each { |d| FileUtils.mkdir_p(File.join(@dir, "nginx", d)) }
    FileUtils.mkdir_p(File.join(@dir, "public"))
    File.write(File.join(@dir, "public", "500.html"), ERROR_PAGE)
    # examples/nginx.conf itself, with this test's socket, port and root
    site = Narwhal::ExampleFile.write("nginx.conf", File.join(@dir, "nginx"),
                                      "unix:/var/www/app/tmp/sockets/narwhal.sock" => "unix:#{@sock}",
                                      "listen 80 deferred;" => "listen 127.0.0.1:#{@port} deferred;",
                                      "root /var/www/app/public;" => "root #{@dir}/public;")
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

  def test_a_request_past_timeout_is_a_502_and_the_next_succeeds
    assert_equal 502, get("/hang")
    assert_equal ERROR_PAGE, @last_body, "the example's error_page"
    assert_match(%r{"GET /hang HTTP/1.0" 502}, File.read(File.join(@dir, "nginx/logs/access.log")))
    assert_match(%r{timeout \(\d+\.\d+s > 2s\) on GET /hang, killing}, @server.log)
    assert_equal 200, get
  end
end
