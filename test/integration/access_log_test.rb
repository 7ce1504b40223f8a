# frozen_string_literal: true

require "test_helper"
require "json"

# access_log as an operator reads it: lines of real narwhal processes in the
# file, in both formats, with one thread and with request threads, across
# USR1 with the file renamed (logrotate), and with several workers and
# threads writing at once: every request one whole line, none split or
# interleaved. Queue time from X-Request-Start reaches the app's env.
class AccessLogIntegrationTest < Minitest::Test
  QUOTED = /"((?:[^"\\]|\\.)*)"/
  STAMP = %r{\[(\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4})\]}
  SECONDS = /(\d+\.\d{6}|-)/
  COMBINED = /\A(\S+) - (\S+) #{STAMP} #{QUOTED} (\d{3}) (\d+) #{QUOTED} #{QUOTED} #{SECONDS} #{SECONDS} #{QUOTED}\n\z/

  # /q: the queue time the app saw; /pad/N: N bytes of body. With a
  # content-length: Rack 2's Lint would have the body sent chunked, and
  # the framing counts as body bytes (as nginx's $body_bytes_sent).
  APP = <<~'RU'
    run lambda { |env|
      body = case env["PATH_INFO"]
             when "/q" then "queue_time=#{env['narwhal.queue_time'].inspect}"
             when %r{\A/pad/(\d+)} then "x" * Integer($1)
             else "ok"
             end
      [200, { "content-type" => "text/plain", "content-length" => body.bytesize.to_s }, [body]]
    }
  RU

  def start(format: :combined, workers: 1, threads: 1, extra: "")
    @server = Narwhal::ServerProcess.start(
      app: APP, workers: workers,
      config: "worker_processes #{workers}\nthreads #{threads}\naccess_log 'access.log', format: :#{format}\n#{extra}"
    )
    @log = File.join(@server.dir, "access.log")
  end

  def teardown
    @server&.stop
  end

  def lines(path = @log)
    File.exist?(path) ? File.readlines(path) : []
  end

  def wait_for_lines(count, path = @log)
    wait_until(timeout: 20, message: "#{count} lines in #{path}: #{lines(path).size}") { lines(path).size >= count }
    lines(path)
  end

  def get(client, path, headers = "", method: "GET")
    client.write("#{method} #{path} HTTP/1.1\r\nHost: t\r\n#{headers}\r\n")
    client.read_response(head: method == "HEAD")
  end

  # floored: a stamp never ahead of the server's clock
  def now_ms
    (Process.clock_gettime(Process::CLOCK_REALTIME) * 1000).floor
  end

  def test_combined_lines_for_the_app_head_and_requests_the_server_refuses
    start(extra: "client_max_body_size 10\n")
    c = @server.connect
    assert_equal 200, get(c, "/pad/7?x=1", "X-Request-Id: abc-123\r\nUser-Agent: t\"e\\st caf\u00e9\r\n" \
                                          "Referer: http://r/\r\n").status
    assert_equal 200, get(c, "/pad/7", method: "HEAD").status
    c.write("POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\n")
    assert_equal 413, c.read_response.status
    bad = @server.connect.write("GET / HTTP/1.1\r\nHost: t\r\nBad Header: x\r\n\r\n")
    assert_equal 400, bad.read_response.status

    found = wait_for_lines(4).map { |l| COMBINED.match(l) || flunk("not combined: #{l.inspect}") }
    get_line, head, too_large, refused = found
    assert_equal ["127.0.0.1", "-", "GET /pad/7?x=1 HTTP/1.1", "200", "7", "http://r/", 't\x22e\x5Cst caf\xC3\xA9',
                  "abc-123"], get_line.captures.values_at(0, 1, 3..7, 10)
    assert_operator Float(get_line.captures[8]), :<, 5
    assert_operator Float(get_line.captures[9]), :<, 5, "the kernel's queue time"
    assert_equal ["HEAD /pad/7 HTTP/1.1", "200", "0"], head.captures.values_at(3, 4, 5)
    # refused by the server: no duration, the body of its error response
    assert_equal ["POST /up HTTP/1.1", "413", "18", "-", "-"], too_large.captures.values_at(3, 4, 5, 8, 9)
    assert_equal ["GET / HTTP/1.1", "400", "12"], refused.captures.values_at(3, 4, 5)
  end

  # A bad header gives way to the kernel's figure: a wait of almost
  # nothing on this idle server.
  def test_queue_time_from_the_proxys_header_and_bad_values_ignored
    start
    c = @server.connect
    {
      "X-Request-Start: t=#{now_ms - 1500}" => 1.5, # HAProxy, Heroku: ms
      "X-Request-Start: t=#{format('%.3f', (now_ms - 250) / 1000.0)}" => 0.25, # nginx t=${msec}
      "X-Queue-Start: t=#{(now_ms - 500) * 1000}" => 0.5, # us
      "X-Request-Start: t=#{now_ms + 60_000}" => 0.0, # a minute ahead
      "X-Request-Start: t=#{now_ms - 7_200_000}" => 0.0, # two hours old
      "X-Request-Start: t=soon" => 0.0,
      "" => 0.0
    }.each do |header, expected|
      body = get(c, "/q", header.empty? ? "" : "#{header}\r\n").body
      seen = Float(body[/\Aqueue_time=(\S+)\z/, 1])
      assert_in_delta expected, seen, expected.zero? ? 0.2 : 1.0, header # generous: the machine is loaded
      assert_operator seen, :>=, expected, header
    end
    queue_times = wait_for_lines(7).map { |l| COMBINED.match(l).captures[9] }
    assert(queue_times.all? { |q| q.match?(/\A\d+\.\d{6}\z/) }, queue_times.inspect)
    assert(queue_times.last(4).all? { |q| Float(q) < 0.2 }, queue_times.inspect)
  end

  def test_json_lines_with_request_threads
    start(format: :json, workers: 1, threads: 4)
    clients = Array.new(4) do |i|
      Thread.new do
        c = @server.connect
        5.times { |j| assert_equal 200, get(c, "/pad/#{i}#{j}", "X-Request-Id: r#{i}-#{j}\r\n").status }
        c.close
      end
    end
    clients.each(&:join)
    entries = wait_for_lines(20).map { |l| JSON.parse(l) }
    assert_equal 20, entries.size
    assert_equal (0..3).flat_map { |i| (0..4).map { |j| "r#{i}-#{j}" } }.sort, entries.map { |e| e["request_id"] }.sort
    entries.each do |e|
      assert_equal ["127.0.0.1", "GET", "HTTP/1.1", 200], e.values_at("remote_addr", "method", "protocol", "status")
      assert_operator e["queue_time"], :<, 5, "the kernel's"
      assert_equal e["uri"][%r{/pad/(\d+)}, 1].to_i, e["bytes"]
      assert_kind_of Float, e["duration"]
    end
  end

  def test_usr1_reopens_a_renamed_log
    start(workers: 2)
    c = @server.connect
    get(c, "/before")
    wait_for_lines(1)
    File.rename(@log, "#{@log}.1")
    @server.signal(:USR1)
    # the master and both workers
    wait_until(timeout: 20, message: "logs reopened") { @server.log.scan(/reopened \d+ log file/).size >= 3 }
    c.close
    c = @server.connect
    get(c, "/after")
    assert_match %r{"GET /after HTTP/1.1" 200}, wait_for_lines(1).first
    assert_equal 1, lines.size
    assert_equal 1, lines("#{@log}.1").size
    assert_match %r{"GET /before HTTP/1.1" 200}, lines("#{@log}.1").first
  end

  # Lines wait up to a second in the worker: TERM (exit at once) and QUIT
  # write them before the worker exits. (The line of a request TERM cuts
  # short may be missing: the 4th request's answer shows the worker logged
  # the 3rd, as it serves one request at a time.)
  def test_lines_gathered_in_the_worker_are_written_when_it_exits
    %i[TERM QUIT].each do |signal|
      start
      c = @server.connect
      4.times { |i| assert_equal 200, get(c, "/#{signal}/#{i}").status }
      @server.signal(signal)
      @server.wait_exit(timeout: 20)
      logged = lines.map { |l| l[%r{"GET /#{signal}/(\d)}, 1] }
      assert_equal %w[0 1 2], logged.first(3), "after #{signal}"
      @server.stop
    end
  end

  # Long lines (3 KiB of URI each) from 3 workers x 2 threads and 6 clients,
  # the file renamed and reopened while they keep sending: each request is
  # one whole line in one of the two files. The clients go on until every
  # process logged its reopen and each sent some requests after that, whose
  # lines must be in the new file (no client races the reopen's effect).
  def test_several_workers_and_threads_write_whole_lines_across_a_reopen
    start(workers: 3, threads: 2)
    half = Queue.new
    reopened = false
    after_reopen = Queue.new # ids of requests sent once every process had reopened
    clients = Array.new(6) do |i|
      Thread.new { reopen_client(i, half, after_reopen) { reopened } }
    end
    6.times { half.pop }
    File.rename(@log, "#{@log}.1")
    @server.signal(:USR1)
    wait_until(timeout: 20, message: "the master and 3 workers reopened") do
      @server.log.scan(/reopened \d+ log file/).size >= 4
    end
    reopened = true
    total = clients.sum(&:value)
    wait_until(timeout: 20, message: "#{total} lines") { lines.size + lines("#{@log}.1").size >= total }
    all = lines("#{@log}.1") + lines
    assert_equal total, all.size
    ids = all.map do |line|
      m = COMBINED.match(line)
      assert m, "split or interleaved: #{line[0, 200].inspect}"
      assert_match %r{\AGET /pad/1\?client=\d&n=\d+&p{3000} HTTP/1.1\z}, m[4]
      m[11]
    end
    assert_equal total, ids.uniq.size
    late = Array.new(after_reopen.size) { after_reopen.pop }
    assert_operator late.size, :>=, 6 * 5
    new_ids = lines.map { |line| COMBINED.match(line)[11] }
    assert_empty late - new_ids, "lines of requests sent after the reopen go to the new file"
  end

  # One client of the test above: at least 40 requests, new connections
  # every 10 (spread over the workers) and whenever a response says
  # `connection: close` (a busy worker sheds the connection), on until 5
  # were sent after the reopen (reopened.call). Returns how many it sent.
  def reopen_client(nr, half, after_reopen, &reopened)
    sent = late = 0
    c = nil
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 60
    until (sent >= 40 && late >= 5) || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      if c.nil? || (sent % 10).zero?
        c&.close
        c = @server.connect
      end
      id = "#{nr}-#{sent}"
      now_late = reopened.call
      response = get(c, "/pad/1?client=#{nr}&n=#{sent}&#{'p' * 3000}", "X-Request-Id: #{id}\r\n")
      assert_equal 200, response.status
      if response["connection"] == "close"
        c.close
        c = nil
      end
      sent += 1
      half << true if sent == 20
      next unless now_late

      late += 1
      after_reopen << id
    end
    sent
  ensure
    c&.close
  end
end
