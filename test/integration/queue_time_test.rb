# frozen_string_literal: true

require "test_helper"
require "json"

# Queue time with no proxy in front, as the app, the access log and
# /metrics see it: the kernel's receive timestamp of a request's bytes.
# A request held 300 ms in the listen queue (its worker busy) reports
# 0.3 s; a kept-alive connection's next request held as long while the
# worker is busy, the same. A trusted X-Request-Start still wins; an
# untrusted one (trust_x_request_start false) is ignored.
class QueueTimeIntegrationTest < Minitest::Test
  HOLD = 0.3
  TOLERANCE = 0.02

  # /hold: stays in the app until the file "release" exists (polled each
  # millisecond), so that the one worker thread is busy; "holding" says it
  # is there. /q: the queue time the app saw.
  APP = <<~'RU'
    run lambda { |env|
      if env["PATH_INFO"] == "/hold"
        File.write("holding", "")
        sleep 0.001 until File.exist?("release")
      end
      body = "queue_time=#{env['narwhal.queue_time'].inspect}"
      [200, { "content-type" => "text/plain", "content-length" => body.bytesize.to_s }, [body]]
    }
  RU

  # access_log: on, every request is read and served in Ruby; off, the
  # common ones in C (RequestLoop): both take the kernel's stamp.
  def start(extra = "", access_log: true)
    log = access_log ? "access_log 'access.log', format: :json\n" : ""
    @server = Narwhal::ServerProcess.start(
      app: APP, config: "worker_processes 1\ncontrol_listen '127.0.0.1:0'\n#{log}#{extra}"
    )
  end

  def teardown
    @server&.stop
  end

  def get(client, path, headers = "")
    client.write("GET #{path} HTTP/1.1\r\nHost: t\r\n#{headers}\r\n")
    client.read_response
  end

  def queue_time(response)
    Float(response.body[/\Aqueue_time=(\S+)\z/, 1] || flunk("no queue time: #{response.body}"))
  end

  def realtime
    Process.clock_gettime(Process::CLOCK_REALTIME)
  end

  # Holds the one worker in /hold, runs the block (which sends the request
  # to be queued) HOLD seconds before the release, and answers how long the
  # block's request really waited for the worker, as this side saw it.
  def while_worker_busy
    holder = @server.connect.write("GET /hold HTTP/1.1\r\nHost: t\r\n\r\n")
    holding = File.join(@server.dir, "holding")
    wait_until(message: "the worker in /hold") { File.exist?(holding) }
    yield
    sent = realtime
    sleep HOLD # the wait under measure, not a synchronisation
    File.write(File.join(@server.dir, "release"), "")
    waited = realtime - sent
    assert_equal 200, holder.read_response.status
    waited
  end

  def test_a_request_held_in_the_listen_queue_reports_its_wait_from_the_kernel
    [true, false].each do |access_log|
      start(access_log: access_log)
      assert_held_in_listen_queue
      @server.stop
      @server = nil
    end
  end

  def test_a_kept_alive_connections_next_request_reports_its_wait
    [true, false].each do |access_log|
      start(access_log: access_log)
      assert_held_on_kept_alive_connection
      @server.stop
      @server = nil
    end
  end

  def test_the_access_log_and_metrics_say_which_source
    start
    c = @server.connect
    get(c, "/q")
    stamp = format("%.3f", realtime - 2)
    assert_in_delta 2.0, queue_time(get(c, "/q", "X-Request-Start: t=#{stamp}\r\n")), 0.5
    log = File.join(@server.dir, "access.log")
    wait_until(message: "two access log lines") { File.exist?(log) && File.readlines(log).size >= 2 }
    kernel, header = File.readlines(log).map { |l| JSON.parse(l)["queue_time"] }
    assert_operator kernel, :<, 0.1
    assert_in_delta 2.0, header, 0.5
    text = @server.control_get("/metrics")
    assert_equal 1, sample(text, %(narwhal_queue_time_seconds_count{worker="0",source="kernel"}))
    assert_equal 1, sample(text, %(narwhal_queue_time_seconds_count{worker="0",source="header"}))
    assert_equal 1, sample(text, %(narwhal_queue_time_seconds_bucket{worker="0",source="header",le="2.5"}))
  end

  def test_an_untrusted_header_gives_way_to_the_kernels_figure
    start("trust_x_request_start false\n")
    c = @server.connect
    stamp = format("%.3f", realtime - 30)
    assert_operator queue_time(get(c, "/q", "X-Request-Start: t=#{stamp}\r\n")), :<, 0.1
  end

  private

  # The hold is HOLD (0.3 s) as scheduled; `waited` is how long it really
  # was as this side saw it (a loaded machine oversleeps): the figure is
  # within TOLERANCE of it.
  def assert_held(seen, waited)
    assert_in_delta HOLD, waited, 0.1, "the test's own hold"
    assert_in_delta waited, seen, TOLERANCE, "queue time #{seen} for a hold of #{waited}"
  end

  def assert_held_in_listen_queue
    waiting = nil
    waited = while_worker_busy { waiting = @server.connect.write("GET /q HTTP/1.1\r\nHost: t\r\n\r\n") }
    seen = queue_time(waiting.read_response)
    assert_held(seen, waited)
  end

  def assert_held_on_kept_alive_connection
    kept = @server.connect
    assert_operator queue_time(get(kept, "/q")), :<, 0.1
    waited = while_worker_busy { kept.write("GET /q HTTP/1.1\r\nHost: t\r\n\r\n") }
    seen = queue_time(kept.read_response)
    assert_held(seen, waited)
  end


  def sample(text, series)
    line = text.lines.find { |l| l.start_with?("#{series} ") } or flunk("no #{series} in:\n#{text}")
    Float(line.split.last)
  end
end
