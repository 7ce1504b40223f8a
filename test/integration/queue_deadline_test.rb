# frozen_string_literal: true

require "test_helper"
require_relative "../support/open_loop"

# queue_deadline as a client and an operator see it: a request that waited
# longer than the deadline before the server got to it is answered 503
# with Retry-After and Connection: close, without the app, and counted
# and logged; under a 3x overload the requests served waited at most about
# the deadline, and every other one gets its 503 soon after the deadline,
# none waiting for a client's own timeout.
class QueueDeadlineIntegrationTest < Minitest::Test
  # /hold: stays in the app until the file "release" exists, so that the
  # one worker thread is busy; "holding" says it is there. /work/MS: takes
  # MS milliseconds. Every call of the app is counted in "calls".
  APP = <<~'RU'
    run lambda { |env|
      File.open("calls", "a") { |f| f.write(env["PATH_INFO"] + "\n") }
      case env["PATH_INFO"]
      when "/hold"
        File.write("holding", "")
        sleep 0.001 until File.exist?("release")
      when %r{\A/work/(\d+)}
        sleep Integer($1) / 1000.0
      end
      body = "queue_time=#{env['narwhal.queue_time'].inspect}"
      [200, { "content-type" => "text/plain", "content-length" => body.bytesize.to_s }, [body]]
    }
  RU

  def start(config)
    @server = Narwhal::ServerProcess.start(
      app: APP, config: "worker_processes 1\ncontrol_listen '127.0.0.1:0'\n#{config}"
    )
  end

  def teardown
    @server&.stop
  end

  def calls
    path = File.join(@server.dir, "calls")
    File.exist?(path) ? File.readlines(path, chomp: true) : []
  end

  # The one worker held in /hold while the block sends; released after
  # `hold` seconds.
  def while_worker_busy(hold)
    holder = @server.connect.write("GET /hold HTTP/1.1\r\nHost: t\r\n\r\n")
    wait_until(message: "the worker in /hold") { File.exist?(File.join(@server.dir, "holding")) }
    yield
    sleep hold # the wait under measure, not a synchronisation
    File.write(File.join(@server.dir, "release"), "")
    assert_equal 200, holder.read_response.status
  end

  def test_a_request_that_waited_past_the_deadline_gets_503_without_the_app
    [false, true].each do |access_log|
      log = access_log ? "access_log 'access.log'\n" : ""
      start("queue_deadline 0.2\n#{log}")
      late = nil
      while_worker_busy(0.4) { late = @server.connect.write("GET /late HTTP/1.1\r\nHost: t\r\n\r\n") }
      response = late.read_response
      assert_equal 503, response.status, "access_log #{access_log}"
      assert_equal "1", response.headers["retry-after"]
      assert_equal "close", response.headers["connection"]
      assert late.closed?, "the connection closes after it"
      fresh = @server.connect.write("GET /fresh HTTP/1.1\r\nHost: t\r\n\r\n")
      assert_equal 200, fresh.read_response.status, "a request that did not wait is served"
      assert_equal %w[/hold /fresh], calls, "the late request never reached the app"
      assert_shed_counted_and_logged(access_log)
      @server.stop
      @server = nil
    end
  end

  def test_a_kept_alive_connections_late_request_is_shed_too
    start("queue_deadline 0.2\n")
    kept = @server.connect
    kept.write("GET /first HTTP/1.1\r\nHost: t\r\n\r\n")
    assert_equal 200, kept.read_response.status
    while_worker_busy(0.4) { kept.write("GET /late HTTP/1.1\r\nHost: t\r\n\r\n") }
    assert_equal 503, kept.read_response.status
    assert kept.closed?
    assert_equal %w[/first /hold], calls
  end

  def test_off_by_default_a_late_request_is_served
    start("")
    late = nil
    while_worker_busy(0.4) { late = @server.connect.write("GET /late HTTP/1.1\r\nHost: t\r\n\r\n") }
    assert_equal 200, late.read_response.status
  end

  # One worker of one thread serves 50 requests a second (20 ms each);
  # 150 a second come for 2 s.
  def test_under_a_3x_overload_the_served_waited_about_the_deadline_and_the_rest_are_shed_fast
    start("queue_deadline 1\n")
    results = Narwhal::OpenLoop.new(@server.host, @server.port, path: "/work/20", rate: 150, count: 300).run
    served = results.select { |r| r.status == 200 }
    shed = results.select { |r| r.status == 503 }
    assert_equal results.size, served.size + shed.size, "every request answered 200 or 503: #{statuses(results)}"
    assert_operator served.size, :>=, 60, "the worker kept serving"
    assert_operator shed.size, :>=, 60, "the excess was shed"
    waits = served.map { |r| Float(r.body[/queue_time=(\S+)/, 1]) }.sort
    assert_operator percentile(waits, 0.99), :<=, 1.1, "p99 queue time of the served"
    slowest_shed = shed.map(&:latency).max
    assert_operator slowest_shed, :<=, 1.5, "each 503 came soon after the deadline"
  end

  private

  def statuses(results)
    results.map(&:status).tally
  end

  def percentile(sorted, q)
    sorted[((sorted.size - 1) * q).round]
  end

  def assert_shed_counted_and_logged(access_log)
    text = wait_until(message: "the shed request counted") do
      t = @server.control_get("/metrics")
      t if t.include?(%(narwhal_requests_shed_total{worker="0",reason="queue_deadline"} 1\n))
    end
    assert_includes text, "# TYPE narwhal_requests_shed_total counter\n"
    wait_until(message: "a log line for the shed request") { @server.log.include?("past queue_deadline") }
    return unless access_log

    log = File.join(@server.dir, "access.log")
    wait_until(message: "the access log's 503") { File.exist?(log) && File.read(log).include?("GET /late") }
    assert_match(%r{"GET /late HTTP/1.1" 503 }, File.read(log))
  end

end
