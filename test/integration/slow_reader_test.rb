# frozen_string_literal: true

require "test_helper"
require "digest"

# Clients that read their responses slowly, or not at all, do not hold the
# worker: what the socket will not take is spooled (memory, then a temporary
# file; a file body is not copied) and the reactor finishes the send while
# the worker serves others. Clients that read promptly get every byte as it
# is written.
module SlowReaderCases
  CHUNK_SIZE = 64 * 1024
  STREAM_CHUNKS = 800 # 50 MiB: far more than the socket buffers hold
  FILE_SIZE = 20 * 1024 * 1024

  APP = <<~RU
    CHUNK = ("0123456789abcdef" * #{CHUNK_SIZE / 16}).freeze
    DATA = (CHUNK * #{FILE_SIZE / CHUNK_SIZE}).freeze
    File.binwrite("big.bin", DATA)

    # A streamed body that leaves a mark once the app has produced all of it.
    # Chunk i carries its number, so that a lost or reordered chunk shows.
    class Stream
      def initialize(id, chunks) = (@id, @chunks = id, chunks)
      def each(&block) = @chunks.times { |i| block.call(format("%08d", i) + CHUNK.byteslice(8, CHUNK.bytesize - 8)) }
      def close = File.write("produced-\#{@id}", "")
    end

    class Events
      def each
        20.times do |i|
          sleep 0.05 if i.positive?
          yield "data: \#{i} \#{Process.clock_gettime(Process::CLOCK_MONOTONIC)}\\n\\n"
        end
      end
    end

    run lambda { |env|
      id = env["QUERY_STRING"]
      case env["PATH_INFO"]
      when "/stream" then [200, { "content-type" => "application/octet-stream" }, Stream.new(id, #{STREAM_CHUNKS})]
      when "/stream-small" then [200, { "content-type" => "application/octet-stream" }, Stream.new(id, 64)]
      when "/file" then Rack::Files.new(Dir.pwd).call(env.merge("PATH_INFO" => "/big.bin"))
      when "/events" then [200, { "content-type" => "text/event-stream" }, Events.new]
      else [200, { "content-type" => "text/plain", "content-length" => (env["PATH_INFO"].bytesize + 3).to_s },
            ["ok \#{env['PATH_INFO']}"]]
      end
    }
  RU
  APP_REQUIRES = "require 'rack/files'\n"

  def self.expected_stream(chunks)
    chunk = "0123456789abcdef" * (CHUNK_SIZE / 16)
    digest = Digest::SHA256.new
    chunks.times { |i| digest << format("%08d", i) << chunk.byteslice(8, chunk.bytesize - 8) }
    digest.hexdigest
  end

  STREAM_SHA = expected_stream(STREAM_CHUNKS)
  SMALL_STREAM_SHA = expected_stream(64)
  FILE_SHA = Digest::SHA256.hexdigest(("0123456789abcdef" * (CHUNK_SIZE / 16)) * (FILE_SIZE / CHUNK_SIZE))

  def now
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  def request(client, path)
    client.write("GET #{path} HTTP/1.1\r\nHost: x\r\n\r\n")
    client
  end

  # One request on a new connection; its latency in seconds.
  def timed_get(path)
    started = now
    c = server.connect
    request(c, path)
    response = c.read_response(timeout: 10)
    assert_equal 200, response.status, "#{path}: #{response.status_line}"
    assert_equal "ok #{path}", response.body
    now - started
  ensure
    c&.close
  end

  def produced?(id)
    File.exist?(File.join(server.dir, "produced-#{id}"))
  end

  # Temporary files and served files the workers hold open.
  def spool_fds
    server.worker_pids.sum do |pid|
      Dir.children("/proc/#{pid}/fd").count do |fd|
        File.readlink("/proc/#{pid}/fd/#{fd}").end_with?("(deleted)", "big.bin")
      rescue SystemCallError
        false
      end
    end
  end

  def percentile(samples, pct)
    samples.sort[((samples.size - 1) * pct).ceil]
  end
end

# Two workers: N + 1 clients that never read a 50 MiB body, a fast client
# beside them, and a real-time stream.
class SlowReaderTest < Minitest::Test
  include SlowReaderCases

  def self.server
    @server ||= Narwhal::ServerProcess.start(
      app: APP_REQUIRES + APP, workers: 2, config: "worker_processes 2\n"
    ).stop_after_run
  end

  def server = self.class.server

  def test_clients_that_never_read_do_not_stop_the_workers
    slow = Array.new(3) { |i| request(server.connect, "/stream?slow#{i}") }
    latencies = []
    # meanwhile, and until every slow body was produced, then for 100 more
    wait_until(timeout: 20, interval: 0, message: "the slow responses produced while a fast client is served") do
      latencies << timed_get("/fast")
      slow.size.times.all? { |i| produced?("slow#{i}") }
    end
    100.times { latencies << timed_get("/fast") }
    p99 = percentile(latencies, 0.99)
    assert_operator p99, :<, 0.5, "fast client p99 #{(p99 * 1000).round(1)} ms over #{latencies.size} requests"

    # the slow clients then read everything, intact and in order
    slow.each do |c|
      response = c.read_response(timeout: 20)
      assert_equal 200, response.status
      assert_equal CHUNK_SIZE * STREAM_CHUNKS, response.body.bytesize
      assert_equal STREAM_SHA, Digest::SHA256.hexdigest(response.body)
    end
    refute_match(/write timeout/, server.log)
    wait_until(message: "spool files freed") { spool_fds.zero? }
  ensure
    slow&.each(&:close)
  end

  def test_a_prompt_reader_gets_each_event_as_it_is_written
    c = request(server.connect, "/events")
    c.read_line(5)
    nil until c.read_line(5).empty?
    delays = Array.new(20) do |i|
      size = Integer(c.read_line(5), 16)
      event = c.read_bytes(size + 2, 5)
      arrived = now
      n, sent = event.match(/\Adata: (\d+) ([\d.]+)/).captures
      assert_equal i, Integer(n)
      arrived - Float(sent)
    end
    assert_operator delays.max, :<, 0.25, "per-event delays: #{delays.map { |d| (d * 1000).round(1) }}"
  ensure
    c&.close
  end
end

# One worker: a slow reader does not delay a second client; file bodies,
# pipelining, resets and graceful stops while a response is still spooled.
class SlowReaderOneWorkerTest < Minitest::Test
  include SlowReaderCases

  # Unlinted: Rack::Lint 2 hides the to_path of the body it wraps.
  def self.server
    @server ||= Narwhal::ServerProcess.start(app: APP_REQUIRES + APP, lint: false).stop_after_run
  end

  def server = @server || self.class.server

  def test_a_slow_reader_does_not_delay_a_second_client
    slow = request(server.connect, "/stream?one")
    wait_until(timeout: 20, message: "the slow response produced") { produced?("one") }
    latencies = Array.new(20) { timed_get("/second") }
    assert_operator latencies.max, :<, 0.5, "latencies: #{latencies.map { |l| (l * 1000).round(1) }} ms"
    response = slow.read_response(timeout: 20)
    assert_equal STREAM_SHA, Digest::SHA256.hexdigest(response.body)
  ensure
    slow&.close
  end

  def test_a_file_body_to_a_client_that_does_not_read_is_sent_later_without_a_copy
    slow = request(server.connect, "/file")
    assert_operator timed_get("/second"), :<, 1, "the worker is free while the file waits"
    fds = server.worker_pids.flat_map do |pid|
      Dir.children("/proc/#{pid}/fd").map { |fd| File.readlink("/proc/#{pid}/fd/#{fd}") rescue "" } # rubocop:disable Style/RescueModifier
    end
    assert fds.any? { |t| t.end_with?("/big.bin") }, "the file is held open to be sent: #{fds}"
    refute fds.any? { |t| t.end_with?("(deleted)") }, "no temporary copy: #{fds}"
    response = slow.read_response(timeout: 20)
    assert_equal FILE_SIZE.to_s, response["content-length"]
    assert_equal FILE_SHA, Digest::SHA256.hexdigest(response.body)
    wait_until(message: "the file closed") { spool_fds.zero? }
  ensure
    slow&.close
  end

  def test_pipelined_requests_behind_a_spooled_response_are_answered_in_order
    c = server.connect
    c.write("GET /stream-small?piped HTTP/1.1\r\nHost: x\r\n\r\n" \
            "GET /after-1 HTTP/1.1\r\nHost: x\r\n\r\nGET /after-2 HTTP/1.1\r\nHost: x\r\n\r\n")
    wait_until(timeout: 20, message: "the first response produced") { produced?("piped") }
    assert_operator timed_get("/other"), :<, 1, "the worker is free"
    first = c.read_response(timeout: 20)
    assert_equal SMALL_STREAM_SHA, Digest::SHA256.hexdigest(first.body)
    assert_equal "ok /after-1", c.read_response.body
    assert_equal "ok /after-2", c.read_response.body
    c.write("GET /after-3 HTTP/1.1\r\nHost: x\r\n\r\n")
    assert_equal "ok /after-3", c.read_response.body, "the connection reads again"
  ensure
    c&.close
  end

  def test_a_client_that_resets_frees_its_spool
    c = request(server.connect, "/stream?reset")
    wait_until(timeout: 20, message: "the response produced") { produced?("reset") }
    assert_operator spool_fds, :>, 0, "spooled to a temporary file"
    c.sock.setsockopt(Socket::SOL_SOCKET, Socket::SO_LINGER, [1, 0].pack("ii")) # close with RST
    c.close
    wait_until(message: "the temporary file freed") { spool_fds.zero? }
    assert_equal 200, server.connect.then { |o| request(o, "/x").read_response.status.tap { o.close } }
  end

  def test_quit_lets_a_spooled_response_finish
    @server = Narwhal::ServerProcess.start(app: APP_REQUIRES + APP)
    slow = request(server.connect, "/stream?quit")
    wait_until(timeout: 20, message: "the response produced") { produced?("quit") }
    server.signal(:QUIT)
    wait_until(message: "QUIT received") { server.log.include?("QUIT received") }
    refute server.exited?, "still sending"
    response = slow.read_response(timeout: 20)
    assert_equal STREAM_SHA, Digest::SHA256.hexdigest(response.body)
    # closed by the stopping worker: at once when its head said close, or
    # once idle for keepalive_timeout (5 s) when it had said keep-alive
    # before the QUIT (a connection is never cut while a request may be on
    # its way on it)
    assert slow.closed?(timeout: 10), "closed after the response"
    assert server.wait_exit(timeout: 15).success?
  ensure
    slow&.close
    @server&.stop
  end
end

# With no room to spool (memory and disk spent), a client that stops
# reading is dropped after write_timeout, as before spooling existed.
class SpoolFullTest < Minitest::Test
  include SlowReaderCases

  def self.server
    @server ||= Narwhal::ServerProcess.start(
      app: APP_REQUIRES + APP,
      config: "response_spool_max 1024 * 1024\nresponse_spool_disk_max 1024 * 1024\nwrite_timeout 0.5\n"
    ).stop_after_run
  end

  def server = self.class.server

  def test_beyond_the_spool_limits_the_writer_waits_under_write_timeout
    c = request(server.connect, "/stream?full")
    wait_until(timeout: 10, message: "write timeout logged") do
      server.log.include?("write timeout: client took no data for 0.5s, closing (GET /stream)")
    end
    assert_equal 200, server.connect.then { |o| request(o, "/x").read_response.status.tap { o.close } }
    assert_operator c.read_to_eof(10).bytesize, :<, CHUNK_SIZE * STREAM_CHUNKS, "cut short"
  ensure
    c&.close
  end
end

# What spools hold on disk (or tmpfs: memory) stays within
# response_spool_disk_max, also while a client reads steadily but slower than
# the app writes, so that the spool's temporary file never drains whole.
class SpoolDiskBoundTest < Minitest::Test
  include SlowReaderCases

  BUDGET = 4 * 1024 * 1024
  PACED_CHUNKS = 320 # 20 MiB, 64 KiB every 5 ms: twice as fast as the reader

  PACED_APP = <<~RU
    CHUNK = ("0123456789abcdef" * #{CHUNK_SIZE / 16}).freeze
    class Paced
      def each
        #{PACED_CHUNKS}.times do
          yield CHUNK
          sleep 0.005
        end
      end
    end
    run ->(_env) { [200, { "content-type" => "application/octet-stream" }, Paced.new] }
  RU

  def setup
    @server = Narwhal::ServerProcess.start(
      app: PACED_APP, config: "response_spool_disk_max #{BUDGET}\nresponse_buffer_size 64 * 1024\nwrite_timeout 30\n"
    )
  end

  def teardown
    @server&.stop
  end

  # Bytes in the worker's unlinked temporary files (the response spool's).
  def spooled_on_disk
    @server.worker_pids.sum do |pid|
      Dir.children("/proc/#{pid}/fd").sum do |fd|
        path = "/proc/#{pid}/fd/#{fd}"
        File.readlink(path).end_with?("(deleted)") ? [File.stat(path).size, File.stat(path).blocks * 512].max : 0
      rescue SystemCallError
        0
      end
    end
  end

  def test_a_spools_temporary_file_never_holds_more_than_the_budget
    c = @server.connect
    c.write("GET /paced HTTP/1.1\r\nHost: x\r\n\r\n")
    c.sock.wait_readable(10)
    received = 0
    largest = 0
    total = CHUNK_SIZE * PACED_CHUNKS
    deadline = now + 60
    # the reader: 64 KiB every 10 ms at most, head and chunk framing included
    while received < total && now < deadline
      data = c.sock.read_nonblock(CHUNK_SIZE, exception: false)
      break if data.nil?

      received += data.bytesize unless data == :wait_readable
      largest = [largest, spooled_on_disk].max
      sleep 0.01 # pacing the reader, not waiting for a condition
    end
    assert_operator received, :>=, total, "the whole body read within the deadline"
    assert_operator largest, :>, 0, "the response was spooled to a temporary file"
    assert_operator largest, :<=, BUDGET, "bytes held on disk by the spool, at most, while the client read"
  ensure
    c&.close
  end
end

# A client that pipelines requests and reads none of the answers, then
# sends a malformed one: the server's 400 finds the socket full. It must not
# stop the worker (the reactor's thread never waits for a client), with one
# request thread or several; the 400 is sent once the client reads.
#
# Over a Unix socket the kernel takes each small write whole until the
# socket's send buffer is spent, then none: with exactly as many requests
# before it as the buffer holds responses (K, measured on a first
# connection), the 400 is the first write the socket refuses.
class ErrorResponseToANonReaderTest < Minitest::Test
  FIONREAD = 0x541B
  APP = "run ->(_env) { [200, { 'content-type' => 'text/plain', 'content-length' => '2' }, ['ok']] }\n"
  GET = "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
  BAD = "GET / HTTP/1.1\r\nBad Header\r\n\r\n"

  def teardown
    @sock&.close
    @server&.stop
    FileUtils.rm_rf(@dir) if @dir
  end

  def start(threads)
    @dir = Dir.mktmpdir("narwhal-sock")
    @path = File.join(@dir, "app.sock")
    config = "worker_processes 1\nthreads #{threads}\nwrite_timeout 30\nclient_header_timeout 1\n"
    @server = Narwhal::ServerProcess.start(app: APP, lint: false, listen: @path, config: config)
  end

  def now
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  # Bytes the client has not read yet.
  def unread(sock)
    buf = [0].pack("i")
    sock.ioctl(FIONREAD, buf)
    buf.unpack1("i")
  end

  # One request on a new connection; raises unless answered within timeout.
  def probe(timeout)
    sock = UNIXSocket.new(@path)
    client = Narwhal::RawClient.new(sock)
    client.write(GET)
    client.read_response(timeout: timeout)
  ensure
    sock&.close
  end

  # The bytes of one answer to GET: all are alike (the date has a fixed length).
  def response_size
    r = probe(10)
    "#{r.status_line}\r\n".bytesize + r.headers.sum { |name, value| "#{name}: #{value}\r\n".bytesize } + 2 + r.body.bytesize
  end

  # K: the responses the socket takes before it refuses a write, from a
  # connection that pipelines many and reads none. Probes answered with no
  # byte more for it: the worker stopped writing to it. (Stopping early
  # could only make the test weaker, never fail it.)
  def responses_the_socket_holds(size)
    sock = UNIXSocket.new(@path)
    sock.write(GET * 3000)
    wait_until(message: "answers arriving") { unread(sock).positive? }
    held = nil
    still = 0 # probes answered in a row with no byte more for it
    wait_until(message: "the worker stopped writing to the client that reads nothing") do
      probe(10)
      still = held == (held = unread(sock)) ? still + 1 : 0
      still >= 2
    end
    assert_equal 0, held % size, "whole responses only (#{held} bytes of #{size}-byte responses)"
    held / size
  ensure
    sock&.close
  end

  # K answered requests, then last (a malformed request, or the start of
  # a head that client_header_timeout answers with 408) on a connection
  # that reads nothing; probes on other connections for probe_for seconds
  # more: each is answered promptly. Returns the connection's client.
  def assert_no_stall(threads, last, probe_for: 0)
    start(threads)
    size = response_size
    k = responses_the_socket_holds(size)
    @sock = UNIXSocket.new(@path)
    @sock.write((GET * k) + last)
    wait_until(message: "the #{k} answers written") { unread(@sock) >= k * size }
    stop_at = now + probe_for
    loop do
      started = now
      assert_equal 200, probe(10).status
      took = now - started
      assert_operator took, :<, 2, "a probe on another connection waited #{took.round(2)}s (write_timeout is 30 s)"
      break if now > stop_at

      sleep 0.02 # pacing the probes
    end
    client = Narwhal::RawClient.new(@sock)
    k.times { assert_equal 200, client.read_response(timeout: 10).status }
    client
  end

  def assert_400_follows(client)
    assert_equal 400, client.read_response(timeout: 10).status, "the 400 follows once the client reads"
    assert client.closed?(timeout: 10)
  end

  def test_an_error_response_to_a_client_that_reads_nothing_does_not_stop_a_worker_with_one_thread
    assert_400_follows(assert_no_stall(1, BAD))
  end

  # (the malformed request is read on an app thread here: a guard)
  def test_an_error_response_to_a_client_that_reads_nothing_does_not_stop_a_worker_with_threads
    assert_400_follows(assert_no_stall(4, BAD))
  end

  # The 408 is the reactor's, with threads too.
  [1, 4].each do |threads|
    define_method("test_a_408_to_a_client_that_reads_nothing_does_not_stop_a_worker_with_threads_#{threads}") do
      client = assert_no_stall(threads, "GET / HTTP/1.1\r\nHost:", probe_for: 2.5)
      assert client.closed?(timeout: 10), "closed after client_header_timeout"
    end
  end
end
