# frozen_string_literal: true

require "test_helper"
require "socket"
require "support/example_file"

# A real haproxy running examples/haproxy-agent.cfg (its ports, stats
# socket and agent interval replaced by the test's; one server) in front of
# narwhal with agent_listen, asked through its own stats socket what it
# made of the agent: the server's weight follows the threads narwhal's
# requests hold, a graceful TERM puts it in DRAIN (the backend's weight 0,
# haproxy sends it nothing), and workers still booting keep it DOWN.
class HaproxyAgentTest < Minitest::Test
  HAPROXY = ["/usr/sbin/haproxy", "haproxy"].find { |n| system("command -v #{n} >/dev/null 2>&1") }
  SRV_ADMF_FDRAIN = 0x08 # srv_admin_state: drained (by the agent or the CLI)

  # /block holds its thread until the release file exists; BOOT_GATE, when
  # set, holds each worker's boot the same way.
  APP = <<~'RU'
    release = ENV.fetch("RELEASE_FILE")
    wait = ->(path) { sleep 0.01 until File.exist?(path) }
    wait.call(ENV["BOOT_GATE"]) if ENV["BOOT_GATE"]
    run lambda { |env|
      wait.call(release) if env["PATH_INFO"] == "/block"
      [200, { "content-type" => "text/plain" }, ["ok"]]
    }
  RU

  def setup
    flunk "haproxy is required (bin/setup installs it)" unless HAPROXY
    @dir = Dir.mktmpdir("narwhal-haproxy-agent")
    @release = File.join(@dir, "release")
    @stats = File.join(@dir, "admin.sock")
    @clients = []
  end

  def teardown
    @clients.each { |c| c.close unless c.closed? }
    if @haproxy_pid
      Process.kill(:TERM, @haproxy_pid)
      Process.wait(@haproxy_pid)
    end
    @server&.stop
    FileUtils.rm_rf(@dir)
  end

  def free_port
    TCPServer.open("127.0.0.1", 0) { |s| s.local_address.ip_port }
  end

  # workers: how many to wait for (0: the master's start only).
  def start_narwhal(workers: 2, env: {})
    @app_port = free_port
    @agent_port = free_port
    config = <<~RUBY
      listen "127.0.0.1:#{@app_port}"
      agent_listen "127.0.0.1:#{@agent_port}"
      worker_processes 2
      threads 2
      term_graceful true
      drain_delay 30
    RUBY
    @server = Narwhal::ServerProcess.new(app: APP, config: config, listen: nil,
                                         env: { "RELEASE_FILE" => @release }.merge(env))
    return @server.wait_ready(workers: workers) if workers.positive?

    wait_until(message: "the agent listener") { @server.log.include?("agent listener on") }
  end

  def start_haproxy
    @port = free_port
    cfg = Narwhal::ExampleFile.write("haproxy-agent.cfg", @dir,
                                     "bind :80" => "bind 127.0.0.1:#{@port}",
                                     "/run/haproxy/admin.sock" => @stats,
                                     "10.0.0.11:8080" => "127.0.0.1:#{@app_port}",
                                     "  server app2 10.0.0.12:8080 check\n" => "",
                                     "agent-port 9395" => "agent-port #{@agent_port}",
                                     "agent-inter 1s" => "agent-inter 100ms")
    @log = File.join(@dir, "haproxy.log")
    @haproxy_pid = Process.spawn(HAPROXY, "-f", cfg, "-db", out: @log, err: @log)
    wait_until(timeout: 15, message: "haproxy's stats socket\n#{haproxy_log}") do
      flunk "haproxy exited:\n#{haproxy_log}" if Process.wait(@haproxy_pid, Process::WNOHANG)
      File.socket?(@stats) && stat("app1")
    rescue SystemCallError
      false
    end
  end

  def haproxy_log
    File.exist?(@log) ? File.read(@log) : ""
  end

  def stats_command(command)
    sock = UNIXSocket.new(@stats)
    sock.write("#{command}\n")
    sock.read
  ensure
    sock&.close
  end

  # One row of `show stat` for the narwhal backend: app1 or BACKEND.
  def stat(name)
    header, *rows = stats_command("show stat").lines.map { |l| l.chomp.split(",", -1) }
    fields = header.first.delete_prefix("# ").then { |first| [first, *header.drop(1)] }
    row = rows.find { |r| r[0] == "narwhal" && r[1] == name }
    row && fields.zip(row).to_h
  end

  # `show servers state`'s row for app1.
  def server_state
    lines = stats_command("show servers state narwhal").lines.map(&:split)
    fields = lines.find { |l| l.first == "#" }.drop(1)
    fields.zip(lines.find { |l| l[3] == "app1" }).to_h
  end

  # what: fields of app1's row, as haproxy shows them.
  def wait_for_haproxy(what)
    wait_until(message: "haproxy to show #{what}") do
      @seen = stat("app1").slice("status", "weight", "last_agt")
      what <= @seen
    end
  rescue Minitest::Assertion => e
    raise Minitest::Assertion, "#{e.message}; it shows #{@seen}\n#{haproxy_log}"
  end

  def block
    sock = TCPSocket.new("127.0.0.1", @app_port)
    sock.write("GET /block HTTP/1.1\r\nhost: x\r\n\r\n")
    @clients << sock
  end

  def get(port)
    sock = TCPSocket.new("127.0.0.1", port)
    sock.write("GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
    sock.read[%r{\AHTTP/1\.[01] (\d{3})}, 1].to_i
  ensure
    sock&.close
  end

  def test_the_weight_follows_the_agent_and_a_graceful_term_drains_the_server
    start_narwhal
    start_haproxy
    wait_for_haproxy("status" => "UP", "weight" => "100")
    3.times { block } # 3 of the 4 threads
    wait_for_haproxy("status" => "UP", "weight" => "25")
    File.write(@release, "")
    wait_for_haproxy("status" => "UP", "weight" => "100")
    assert_equal 200, get(@port)

    @server.signal(:TERM)
    wait_for_haproxy("status" => "DRAIN (agent)")
    assert_equal "0", stat("BACKEND")["weight"], "nothing left to balance over"
    assert_equal SRV_ADMF_FDRAIN, Integer(server_state["srv_admin_state"]) & SRV_ADMF_FDRAIN
    assert_equal 503, get(@port), "haproxy sends the drained server no new request"
    assert_equal 200, get(@app_port), "while narwhal still serves (drain_delay)"
  end

  # Until a worker serves the agent says `down #booting`: haproxy keeps
  # the server DOWN although its port accepts; then `up ready 100%`.
  def test_workers_still_booting_keep_the_server_down_until_one_serves
    gate = File.join(@dir, "boot")
    start_narwhal(workers: 0, env: { "BOOT_GATE" => gate })
    start_haproxy
    wait_for_haproxy("status" => "DOWN (agent)", "last_agt" => "via agent : down (booting)")
    assert_equal 503, get(@port)
    File.write(gate, "")
    wait_for_haproxy("status" => "UP", "weight" => "100", "last_agt" => "via agent : up")
    assert_equal 200, get(@port)
  end
end
