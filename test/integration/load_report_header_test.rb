# frozen_string_literal: true

require "test_helper"
require "socket"
require "tmpdir"

# orca_load_report end to end, read as Envoy reads the header: on the
# responses the C loop serves (a plain GET) and on those Ruby writes (a
# body to read, the access log), not beside the app's own report, not on
# the server's own 400, absent when off; its utilization rising while
# requests hold threads, its queue counting connections no thread took.
class LoadReportHeaderTest < Minitest::Test
  # /hold?NAME holds its thread until the test creates the file NAME;
  # /own reports load itself. Not behind Rack::Lint: its body wrapper
  # would send every response through Ruby.
  APP = <<~'RU'
    dir = ENV.fetch("RELEASE_DIR")
    now = -> { Process.clock_gettime(Process::CLOCK_MONOTONIC) }
    run lambda { |env|
      case env["PATH_INFO"]
      when "/hold"
        release = File.join(dir, env["QUERY_STRING"])
        deadline = now.call + 30
        sleep 0.01 until File.exist?(release) || now.call > deadline
      when "/own"
        next [200, { "endpoint-load-metrics" => "TEXT eps=1" }, ["own"]]
      end
      [200, { "content-type" => "text/plain" }, ["ok #{env['rack.input']&.read}"]]
    }
  RU
  HEADER = "endpoint-load-metrics"

  def setup
    @tmp = Dir.mktmpdir("narwhal-orca")
    @clients = []
  end

  def teardown
    @clients.each { |c| c.close unless c.closed? }
    @server&.stop
    FileUtils.rm_rf(@tmp)
  end

  def start(config)
    @server = Narwhal::ServerProcess.start(app: APP, config: config, lint: false, env: { "RELEASE_DIR" => @tmp })
  end

  def connect
    sock = TCPSocket.new("127.0.0.1", @server.port)
    @clients << sock
    Narwhal::RawClient.new(sock)
  end

  def send_request(path = "/", body: nil, client: connect)
    return client.write("GET #{path} HTTP/1.1\r\nhost: x\r\n\r\n") unless body

    client.write("POST #{path} HTTP/1.1\r\nhost: x\r\ncontent-length: #{body.bytesize}\r\n\r\n#{body}")
  end

  def get(path = "/", **options)
    response = send_request(path, **options).read_response(timeout: 10)
    @last_response_at = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    response
  end

  # The header as Envoy's ORCA text parser reads it: name => number.
  def report(response)
    value = response[HEADER] or flunk "no #{HEADER} in #{response.status_line}: #{response.headers.inspect}"
    refute_includes value, "\n", "one #{HEADER} field"
    assert value.start_with?("TEXT "), value
    value.delete_prefix("TEXT ").split(",").to_h do |pair|
      name, number = pair.strip.split("=", 2)
      [name, Float(number)]
    end
  end

  def control_metrics
    @control ||= wait_until(message: "the control listener's address") do
      @server.log[/control listener on 127\.0\.0\.1:(\d+)/, 1]
    end
    client = Narwhal::RawClient.new(TCPSocket.new("127.0.0.1", Integer(@control)))
    client.write("GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n").read_response(timeout: 10).body
  ensure
    client&.sock&.close
  end

  def sample(name)
    @metrics = control_metrics
    line = @metrics.lines.find { |l| l.start_with?("#{name} ") }
    line && Float(line.split.last)
  end

  def hold(name)
    client = connect
    send_request("/hold?#{name}", client: client)
  end

  def release(name)
    File.write(File.join(@tmp, name), "")
  end

  def test_every_response_of_the_app_carries_the_report_on_either_path
    start("worker_processes 2\nthreads 2\norca_load_report true\n")
    served_in_c = get
    assert_equal 200, served_in_c.status
    assert_equal %w[application_utilization named_metrics.queue rps_fractional], report(served_in_c).keys.sort
    read_in_ruby = get("/", body: "hello")
    assert_equal "ok hello", read_in_ruby.body
    report(read_in_ruby)
    own = get("/own")
    assert_equal "TEXT eps=1", own[HEADER], "the app's own report, alone"
    refused = connect.write("NOT HTTP\r\n\r\n").read_response(timeout: 10)
    assert_equal 400, refused.status
    assert_nil refused[HEADER], "the server's own error responses carry none"
  end

  def test_with_the_access_log_the_ruby_path_carries_it
    start(%(orca_load_report true\naccess_log "#{@tmp}/access.log"\n))
    report(get)
    report(get("/", body: "x"))
  end

  def test_off_by_default
    start("threads 2\n")
    [get, get("/", body: "x")].each do |response|
      assert_equal 200, response.status
      assert_nil response[HEADER]
    end
    assert_equal "TEXT eps=1", get("/own")[HEADER], "the app's own passes as any field"
  end

  # 1 worker x 4 threads: three held, the average share of busy threads
  # climbs towards 3/4 (over about SMOOTHING); all four held, the next
  # connections wait, and the first response written after REFRESH counts
  # them.
  def test_utilization_rises_while_threads_are_held_and_the_queue_counts_waiting_connections
    start(%(threads 4\norca_load_report true\ncontrol_listen "127.0.0.1:0"\n))
    idle = report(get)
    assert_operator idle["application_utilization"], :<=, 0.25, "only the request itself was in flight"
    %w[a b c].each { |name| hold(name) }
    wait_until(message: "3 threads busy") { sample(%(narwhal_threads{state="busy"})) == 3 }
    busy = wait_until(timeout: 15, interval: 0.05, message: "utilization past 1/2") do
      probe = report(get)
      probe if probe["application_utilization"] >= 0.5
    end
    assert_operator busy["application_utilization"], :<=, 1.0
    assert_operator busy["rps_fractional"], :>, 0, "the probes finished"

    held = hold("d")
    wait_until(message: "4 threads busy") { sample(%(narwhal_threads{state="busy"})) == 4 }
    3.times { send_request }
    listener = %(narwhal_listen_queue{listener="#{@server.host}:#{@server.port}"})
    wait_until(message: "connections in the listen queue (#{@metrics})") { sample(listener).to_i >= 2 }
    # the next response samples again: the last one must be REFRESH old
    wait_until(message: "REFRESH since the last response") do
      Process.clock_gettime(Process::CLOCK_MONOTONIC) - @last_response_at > Narwhal::LoadReport::REFRESH
    end
    release("d")
    assert_operator report(held.read_response(timeout: 10))["named_metrics.queue"], :>=, 2
    %w[a b c].each { |name| release(name) }
    @clients.last(3).each { |sock| assert_equal 200, Narwhal::RawClient.new(sock).read_response(timeout: 10).status }
  end
end
