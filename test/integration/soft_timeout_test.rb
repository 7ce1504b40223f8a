# frozen_string_literal: true

require "test_helper"

# soft_timeout with real processes: what the client of an interrupted
# request gets, what the log says, the app's ensure blocks, the worker's
# retirement (or not, with keep_worker), and the master's SIGKILL as the
# backstop for an app that will not stop.
class SoftTimeoutIntegrationTest < Minitest::Test
  APP = <<~'RU'
    text = { "content-type" => "text/plain" }
    run lambda { |env|
      case env["PATH_INFO"]
      when "/slow"
        begin
          sleep 30
          [200, text, ["late"]]
        rescue StandardError
          [200, text, ["an app's rescue => e caught it"]]
        ensure
          File.write("ensure-ran", Process.pid.to_s) # the server runs in its temporary directory
        end
      when "/stream"
        body = Object.new
        def body.each
          yield "first"
          sleep 30
          yield "never"
        end
        [200, text, body]
      when "/stubborn"
        begin
          sleep 30
        rescue Exception
          sleep 30 # swallows the soft timeout and hangs on
        end
        [200, text, ["late"]]
      when "/linger" # takes the soft timeout, and ends 10 s later
        begin
          sleep 30
        rescue Exception
          sleep 10
        end
        [200, text, ["lingered"]]
      when "/pid" then [200, text, ["#{Process.pid} threads=#{Thread.list.size}"]]
      end
    }
  RU

  def start(config, app: APP, **kw)
    @servers ||= []
    server = Narwhal::ServerProcess.new(app: app, config: config, **kw)
    @servers << server
    server.wait_ready
  end

  def teardown
    @servers&.each(&:stop)
  end

  # [pid, Ruby threads] of the worker that answers
  def worker_info(server)
    body = server.get("/pid").body
    [Integer(body[/\A\d+/]), Integer(body[/threads=(\d+)/, 1])]
  end

  def test_past_soft_timeout_the_client_gets_503_the_ensure_runs_and_a_new_worker_takes_over
    server = start("soft_timeout 0.5\ntimeout 20\n")
    old, threads = worker_info(server)
    assert_equal 2, threads, "the app thread and the watchdog"
    c = server.connect
    c.write("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
    response = c.read_response(timeout: 15)
    assert_equal 503, response.status
    assert_equal "close", response["connection"]
    assert_equal "Service Unavailable\n", response.body
    assert c.closed?(timeout: 10), "the connection is closed after the 503"
    assert_equal old.to_s, File.read(File.join(server.dir, "ensure-ran"))
    line = %r{request timeout: GET /slow ran 0\.[5-9]\d*s, past soft_timeout \(0\.5s\); answered 503, closing\n}
    assert_match(/#{line}#{Regexp.escape(server.dir)}\/config\.ru:8:in `sleep'\n/, server.log)
    wait_until(timeout: 15, message: "a replacement worker") { server.log.match?(/worker=1 ready pid=(?!#{old}\b)\d+/) }
    assert_match(/retiring after a soft timeout: serving on until a replacement is ready/, server.log)
    wait_until(timeout: 15, message: "the old worker gone") do
      server.log.match?(/reaped #<Process::Status: pid #{old} exit 0> worker=0/)
    end
    assert_match(/worker=1 pid=\d+ serves in place of worker=0 pid=#{old}: sending it QUIT/, server.log)
    assert_match(/worker=0 pid=#{old} exiting/, server.log)
    new, = worker_info(server)
    refute_equal old, new
  end

  # The only worker retires after a soft timeout while another of its
  # requests runs on: its replacement is forked at once and serves, as a
  # recycled worker's does, instead of after that request.
  def test_a_worker_retiring_after_a_soft_timeout_is_replaced_first
    server = start("preload_app true\nsoft_timeout 0.5\ntimeout 30\nthreads 2\n")
    old, = worker_info(server)
    long = server.connect
    long.write("GET /linger HTTP/1.1\r\nHost: x\r\n\r\n")
    wait_until(timeout: 10, message: "the long request in the worker") { server.connection_fds > 1 }
    assert_equal 503, server.get("/slow", timeout: 10).status
    pid = wait_until(timeout: 10, message: "the replacement answers") do
      served = Integer(server.get("/pid", timeout: 6).body[/\A\d+/])
      served unless served == old # (the old worker serves on until then)
    rescue Timeout::Error
      flunk "a new request got no answer within 6 s while the long request runs"
    end
    refute long.sock.wait_readable(0), "the long request still runs (it ends 10 s after its soft timeout)"
    assert_match(/worker=1 pid=#{pid} serves in place of worker=0 pid=#{old}: sending it QUIT/, server.log)
    assert_equal 200, long.read_response(timeout: 20).status, "the old worker finishes it"
    wait_until(timeout: 10, message: "the old worker gone") { server.worker_pids == [pid] }
  end

  def test_keep_worker_serves_on_with_the_same_process
    server = start("soft_timeout 0.5, keep_worker: true\ntimeout 20\n")
    old, = worker_info(server)
    assert_equal 503, server.get("/slow").status
    assert_equal old.to_s, File.read(File.join(server.dir, "ensure-ran"))
    assert_equal old, worker_info(server).first
    assert_equal [old], server.worker_pids
    refute_match(/retiring|exiting/, server.log)
  end

  # Bytes went out: no 503 can follow them; the client has what was sent,
  # then the connection closes (the chunked body never ends).
  def test_a_soft_timeout_mid_response_closes_the_connection_after_the_partial_body
    server = start("soft_timeout 0.5, keep_worker: true\ntimeout 20\n")
    c = server.connect
    c.write("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
    raw = c.read_to_eof(15)
    assert_match(%r{\AHTTP/1.1 200 OK\r\n.*\r\n\r\n5\r\nfirst\r\n\z}m, raw)
    assert_includes raw, "\r\ntransfer-encoding: chunked\r\n"
    assert_match(%r{request timeout: GET /stream ran \d\.\d+s, past soft_timeout \(0\.5s\); response cut short},
                 server.log)
  end

  HINTS_APP = <<~'RU'
    LINK = "</style.css>; rel=preload; as=style, " * 250_000 # 9 MB: more than the socket buffers hold
    run lambda { |env|
      env["rack.early_hints"].call("link" => LINK)
      if env["PATH_INFO"] == "/hijack" # the 103 is spooled: hijack waits for the client to take it
        io = env["rack.hijack"].call
        io.write("HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nhi")
        io.close
        return [200, {}, []]
      end
      sleep 30
      [200, { "content-type" => "text/plain" }, ["late"]]
    }
  RU

  # The 103 is written from within the app's code: a soft timeout must not
  # cut it in half (a client would read the 503 inside the 103's head).
  def test_a_soft_timeout_never_cuts_early_hints_in_half
    assert_early_hints_whole("/hints", "response_spool_max 0\n")
  end

  def test_a_soft_timeout_never_cuts_early_hints_in_half_in_hijacks_flush
    assert_early_hints_whole("/hijack", "")
  end

  # A slow reader of a 9 MB 103 and what follows it: the 103 whole, then
  # the 503.
  def assert_early_hints_whole(path, config)
    server = start("soft_timeout 0.5, keep_worker: true\ntimeout 20\nearly_hints true\n#{config}",
                   app: HINTS_APP, lint: false)
    c = server.connect
    c.write("GET #{path} HTTP/1.1\r\nHost: x\r\n\r\n")
    raw = +""
    # a slow reader: the 103 takes seconds to go out, past soft_timeout
    wait_until(timeout: 30, interval: 0, message: "the request timed out") do
      raw << c.sock.read_nonblock(65_536, exception: false).then { |d| d.is_a?(String) ? d : "" }
      sleep 0.01 # pacing the reader
      server.log.include?("request timeout: GET #{path}")
    end
    raw << c.read_to_eof(15)
    head_end = raw.index("\r\n\r\n") + 4
    hints = raw.byteslice(0, head_end).sub(/^date: [^\r]*\r\n/, "")
    link = "</style.css>; rel=preload; as=style, " * 250_000
    assert hints == "HTTP/1.1 103 Early Hints\r\nlink: #{link}\r\n\r\n",
           "the 103 whole, first: a 503 at byte #{raw.index('HTTP/1.1 503').inspect} of #{raw.bytesize}"
    assert_match(%r{\AHTTP/1.1 503 Service Unavailable\r\n}, raw.byteslice(head_end..))
  ensure
    c&.close
  end

  # The app rescues Exception and hangs on: the master's timeout kills the
  # worker, and says how many other requests died with it (none with one
  # thread).
  def test_an_app_that_swallows_the_soft_timeout_is_killed_at_timeout
    server = start("soft_timeout 0.3\ntimeout 1.5\n")
    old, = worker_info(server)
    c = server.connect
    c.write("GET /stubborn HTTP/1.1\r\nHost: x\r\n\r\n")
    assert_equal 504, c.read_response(timeout: 15).status, "answered before the kill"
    assert c.closed?(timeout: 15), "the connection of the killed worker is closed"
    wait_until(message: "the kill's line") { server.log.include?("killing") } # written after the answer
    assert_match(%r{worker=0 pid=#{old} timeout \(\d+\.\d+s > 1\.5s\) on GET /stubborn, killing; no other request in flight; answered 504 to 1 request, 503 to 0 waiting$}, # rubocop:disable Layout/LineLength
                 server.log)
    wait_until(timeout: 15, message: "a replacement worker") { server.log.match?(/worker=0 ready pid=(?!#{old}\b)\d+/) }
    refute_equal old, worker_info(server).first
  end

  def test_without_soft_timeout_no_thread_is_added
    server = start("timeout 20\n")
    assert_equal 1, worker_info(server).last
  end

  def test_a_soft_timeout_not_below_timeout_stops_the_start_and_a_hup_keeps_the_running_config
    bad = Narwhal::ServerProcess.new(app: APP, config: "timeout 10\nsoft_timeout 10\n")
    @servers = [bad]
    refute bad.wait_exit(timeout: 15).success?
    assert_match(%r{narwhal: \S*/narwhal\.conf\.rb:2: soft_timeout 10 must be below timeout \(10\)}, bad.log)
    refute_match(/listening on/, bad.log)

    server = start("soft_timeout 5\ntimeout 20\n")
    old, = worker_info(server)
    File.write(File.join(server.dir, "narwhal.conf.rb"), "soft_timeout 5\n\ntimeout 5\n")
    server.signal(:HUP)
    wait_until(timeout: 15, message: "the reload error") { server.log.include?("error reloading") }
    assert_match(/narwhal\.conf\.rb:1: soft_timeout 5 must be below timeout \(5\).*; keeping the running configuration/,
                 server.log)
    assert_equal old, worker_info(server).first
  end
end
