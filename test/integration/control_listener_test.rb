# frozen_string_literal: true

require "test_helper"
require "open3"
require "socket"
require "tmpdir"
require "json"

# control_listen end to end: a real master answering /metrics, /health,
# /ready and /status while its worker is busy and requests queue in the
# kernel, checked by Prometheus's own promtool and read by `narwhal status`.
class ControlListenerTest < Minitest::Test
  # /block holds the only worker until the test creates the release file.
  APP = <<~'RU'
    release = ENV.fetch("RELEASE_FILE")
    run lambda { |env|
      if env["PATH_INFO"].start_with?("/block")
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 30
        sleep 0.01 until File.exist?(release) || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      end
      [200, { "content-type" => "text/plain" }, ["ok"]]
    }
  RU

  def setup
    @tmp = Dir.mktmpdir("narwhal-control")
    @release = File.join(@tmp, "release")
    @unix_app = File.join(@tmp, "app.sock")
    @clients = []
  end

  def teardown
    @clients.each { |c| c.close unless c.closed? }
    @server&.stop
    FileUtils.rm_rf(@tmp)
  end

  def start(config, **options)
    @server = Narwhal::ServerProcess.start(app: APP, config: config, env: { "RELEASE_FILE" => @release }, **options)
    @control = wait_until(message: "the control listener's address") do
      @server.log[/control listener on (\S+)/, 1]
    end
  end

  def control_get(path, method: "GET")
    kind, host, port = Narwhal::Listener.parse(@control)
    sock = kind == :unix ? UNIXSocket.new(host) : TCPSocket.new(host, port)
    client = Narwhal::RawClient.new(sock)
    client.write("#{method} #{path} HTTP/1.1\r\nhost: x\r\n\r\n")
    response = client.read_response(head: method == "HEAD", timeout: 10)
    assert client.closed?(timeout: 5), "the control listener closes after answering"
    response
  ensure
    sock&.close
  end

  def metrics
    control_get("/metrics").body
  end

  def sample(text, name)
    line = text.lines.find { |l| l.start_with?("#{name} ") }
    line && Float(line.split.last)
  end

  def queued(text, listener)
    sample(text, %(narwhal_listen_queue{listener="#{listener}"}))
  end

  def send_request(sock, path = "/")
    @clients << sock
    sock.write("GET #{path} HTTP/1.1\r\nhost: x\r\n\r\n")
    Narwhal::RawClient.new(sock)
  end

  def promtool_check(text)
    assert system("which promtool > /dev/null"), "promtool missing: bin/setup --test installs Debian's prometheus"
    out, status = Open3.capture2e("promtool", "check", "metrics", stdin_data: text)
    assert status.success?, "promtool check metrics failed:\n#{out}\n#{text}"
  end

  def narwhal_status(*args)
    Open3.capture3(RbConfig.ruby, "-I", File.join(Narwhal::ServerProcess::ROOT, "lib"),
                   Narwhal::ServerProcess::EXE, "status", *args)
  end

  def test_metrics_while_requests_queue_then_drain_and_promtool_accepts_them
    start(%(control_listen "127.0.0.1:0"\nlisten "#{@unix_app}"\n))
    tcp = @server.log[/listening on addr=(127\.0\.0\.1:\d+)/, 1]
    port = Integer(tcp.split(":").last)
    assert_equal ["ok\n", 200], control_get("/health").then { |r| [r.body, r.status] }
    assert_equal 200, control_get("/ready").status

    blocked = send_request(TCPSocket.new("127.0.0.1", port), "/block?secret=1")
    wait_until(message: "the worker busy") { metrics.include?(%(narwhal_workers{state="busy"} 1)) }
    waiting = Array.new(3) { send_request(TCPSocket.new("127.0.0.1", port)) } +
              Array.new(2) { send_request(UNIXSocket.new(@unix_app)) }
    loaded = wait_until(message: "3 TCP and 2 Unix connections in the listen queues") do
      text = metrics
      text if queued(text, tcp) == 3 && queued(text, @unix_app) == 2
    end
    assert_equal 1024, sample(loaded, %(narwhal_listen_queue_max{listener="#{tcp}"}))
    assert_equal 1024, sample(loaded, %(narwhal_listen_queue_max{listener="#{@unix_app}"}))
    assert_equal 1, sample(loaded, %(narwhal_threads{state="busy"}))
    assert_operator sample(loaded, %(narwhal_worker_rss_bytes{worker="0"})), :>, 1_000_000
    promtool_check(loaded)

    out, err, status = narwhal_status("--control", @control)
    assert status.success?, err
    assert_match(/^master pid=#{@server.pid} ready, up \d+s; workers: 1 busy; threads: 1 of 1 busy \(1 x 1\); listen queue: /,
                 out)
    assert_includes out.lines.first, "#{tcp} 3/1024"
    assert_includes out.lines.first, "#{@unix_app} 2/1024"
    assert_match(%r{^\s+0\s+#{@server.worker_pids.first}\s+busy\s+0\s+1/1\s+\d+\.\ds\s+GET\s+\d+\.\d MiB$}, out)
    refute_includes out, "/block", "no path without control_status_paths"

    File.write(@release, "")
    ([blocked] + waiting).each { |c| assert_equal "ok", c.read_response(timeout: 10).body }
    drained = wait_until(message: "the queues empty again") do
      text = metrics
      text if queued(text, tcp).zero? && queued(text, @unix_app).zero? && text.include?(%(narwhal_workers{state="idle"} 1))
    end
    assert_equal 6, sample(drained, %(narwhal_worker_requests_total{worker="0"}))
    assert_equal 6, sample(drained, %(narwhal_request_duration_seconds_count{worker="0"}))
    assert_equal 6, sample(drained, %(narwhal_request_duration_seconds_bucket{worker="0",le="+Inf"}))
    assert_operator sample(drained, %(narwhal_request_duration_seconds_bucket{worker="0",le="0.05"})), :<=, 5,
                    "the blocked request took longer than 50 ms"
    promtool_check(drained)
  end

  def test_probes_status_and_respawns_over_a_unix_control_socket
    control = File.join(@tmp, "control.sock")
    conf = File.join(@tmp, "narwhal.rb")
    File.write(conf, %(control_listen "#{control}"\n))
    start(%(control_listen "#{control}"\n))
    assert_equal control, @control

    assert_equal 404, control_get("/nope").status
    assert_equal 405, control_get("/metrics", method: "POST").status
    head = control_get("/metrics", method: "HEAD")
    assert_equal [200, ""], [head.status, head.body]

    old = @server.worker_pids.first
    Process.kill(:KILL, old)
    text = wait_until(message: "a respawned worker serving") do
      t = metrics
      t if sample(t, "narwhal_respawns_total") == 1 && t.include?(%(narwhal_workers{state="idle"} 1))
    end
    refute_equal old, sample(text, %(narwhal_worker_pid{worker="0"})).to_i
    assert_equal 200, control_get("/ready").status

    out, err, status = narwhal_status("-c", conf)
    assert status.success?, err
    assert_match(/^worker\s+pid\s+state\s+requests\s+busy\s+age\s+request\s+rss$/, out)
    assert_match(%r{^\s+0\s+\d+\s+idle\s+0\s+0/1\s+-\s+-\s+\d+\.\d MiB$}, out)
    assert_match(/\Amaster pid=#{@server.pid} ready, up \d+(m \d+)?s; workers: 1 idle; threads: 0 of 1 busy /, out)
    assert_match(/^since start: 1 respawned, 0 killed for timeout, 0 recycled /, out)

    @server.signal(:QUIT)
    @server.wait_exit(timeout: 15)
    refute File.exist?(control), "the master removes its control socket"
    _, err, status = narwhal_status("--control", control)
    refute status.success?
    assert_match(/narwhal status: no answer from the control listener/, err)
  end

  # A path may carry a secret (a password-reset token): /status and
  # `narwhal status` show the method and age of a request in flight, and
  # its path (never its query) only with `control_status_paths true`.
  def test_request_paths_leave_status_unless_the_operator_opts_in
    token = "/block/reset/t0k3n-5ecret"
    [["", nil], ["control_status_paths true\n", token]].each do |extra, shown|
      start(%(control_listen "127.0.0.1:0"\n#{extra}))
      blocked = send_request(TCPSocket.new(@server.host, @server.port), "#{token}?q=1")
      request = wait_until(message: "the request in flight in /status") do
        JSON.parse(control_get("/status").body).dig("workers", 0, "request")
      end
      assert_equal "GET", request["method"]
      assert_kind_of Float, request["seconds"]
      shown ? assert_equal(shown, request["path"]) : assert_nil(request["path"])
      assert_equal shown.nil?, !request.key?("path"), "no path key without the directive"
      out, err, status = narwhal_status("--control", @control)
      assert status.success?, err
      assert_equal !shown.nil?, out.include?(token), out
      refute_includes out, "q=1"
      File.write(@release, "")
      assert_equal 200, blocked.read_response(timeout: 10).status
      @server.stop
      File.delete(@release)
    end
  end

  # The control socket answers anyone who can connect to it: only the
  # master's user (and root) can, whatever the umask narwhal started with.
  # The app's own Unix listener keeps `listen`'s umask 0 (nginx connects).
  def test_a_unix_control_socket_is_0600_whatever_the_umask
    control = File.join(@tmp, "control.sock")
    start(%(control_listen "#{control}"\nlisten "#{@unix_app}"\n),
          wrapper: ["/bin/sh", "-c", 'umask 000 && exec "$@"', "sh"])
    assert_equal 0o600, File.stat(control).mode & 0o777
    assert_equal 0o777, File.stat(@unix_app).mode & 0o777
    assert_equal 200, control_get("/ready").status
  end

  # X-Request-Start as nginx sets it (t= milliseconds): the wait before the
  # app ran lands in the header's queue-time histogram; a request without
  # the header, or with a stamp from the future, in the kernel's.
  def test_queue_time_from_the_proxy_header_fills_its_histogram
    start(%(control_listen "127.0.0.1:0"\n))
    port = Integer(@server.log[/listening on addr=127\.0\.0\.1:(\d+)/, 1])
    stamp = ((Time.now.to_f - 0.2) * 1000).round # 200 ms in the proxy's queue
    future = ((Time.now.to_f + 600) * 1000).round
    [{ "x-request-start" => "t=#{stamp}" }, {}, { "x-request-start" => "t=#{future}" }].each do |headers|
      sock = TCPSocket.new("127.0.0.1", port)
      @clients << sock
      sock.write("GET / HTTP/1.1\r\nhost: x\r\n#{headers.map { |k, v| "#{k}: #{v}\r\n" }.join}\r\n")
      assert_equal 200, Narwhal::RawClient.new(sock).read_response(timeout: 10).status
    end
    text = wait_until(message: "three requests counted") do
      t = metrics
      t if sample(t, %(narwhal_worker_requests_total{worker="0"})) == 3
    end
    assert_equal 1, sample(text, %(narwhal_queue_time_seconds_count{worker="0",source="header"}))
    assert_equal 0, sample(text, %(narwhal_queue_time_seconds_bucket{worker="0",source="header",le="0.1"}))
    assert_equal 1, sample(text, %(narwhal_queue_time_seconds_bucket{worker="0",source="header",le="0.5"}))
    assert_in_delta 0.2, sample(text, %(narwhal_queue_time_seconds_sum{worker="0",source="header"})), 0.25
    assert_equal 2, sample(text, %(narwhal_queue_time_seconds_count{worker="0",source="kernel"}))
    promtool_check(text)
  end
end
