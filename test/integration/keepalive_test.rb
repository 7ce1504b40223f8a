# frozen_string_literal: true

require "test_helper"

# Connection lifetime: persistence rules of HTTP/1.0 and 1.1, pipelining,
# the keep-alive and client timeouts, the per-connection request limit, and
# clients that go away in the middle of a request or a response.
class KeepaliveTest < Minitest::Test
  BIG_CHUNK = 64 * 1024
  BIG_CHUNKS = 512 # a 32 MiB response: more than the socket buffers hold

  APP = <<~RU
    chunk = "x" * #{BIG_CHUNK}
    run lambda { |env|
      if env["PATH_INFO"] == "/big"
        body = Enumerator.new { |y| #{BIG_CHUNKS}.times { y << chunk } }
        next [200, { "content-type" => "application/octet-stream",
                     "content-length" => "#{BIG_CHUNK * BIG_CHUNKS}" }, body]
      end
      body = "\#{env['SERVER_PROTOCOL']} \#{env['PATH_INFO']} \#{env['rack.input'].read}"
      [200, { "content-type" => "text/plain", "content-length" => body.bytesize.to_s }, [body]]
    }
  RU

  SHORT = <<~CONF
    keepalive_timeout 1
    client_timeout 1
    keepalive_requests 3
  CONF

  def self.servers
    @servers ||= {}
  end

  # descriptors of each server when it had no client yet
  def self.idle_fds
    @idle_fds ||= {}
  end

  def self.server(config = nil)
    servers[config] ||= Narwhal::ServerProcess.start(app: APP, config: config).tap do |s|
      s.stop_after_run
      idle_fds[s] = s.connection_fds
    end
  end

  def server
    self.class.server
  end

  def short
    self.class.server(SHORT)
  end

  def now
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  def get(path, version: "1.1", headers: "")
    host = version == "1.1" ? "Host: x\r\n" : ""
    "GET #{path} HTTP/#{version}\r\n#{host}#{headers}\r\n"
  end

  def assert_response(response, body, connection: nil)
    assert_equal "HTTP/1.1 200 OK", response.status_line
    assert_equal body, response.body
    assert_equal body.bytesize.to_s, response["content-length"]
    if connection
      assert_equal connection, response["connection"]
    else
      assert_nil response["connection"]
    end
  end

  def test_http11_connections_persist_by_default
    c = server.connect
    3.times do |i|
      c.write(get("/#{i}"))
      assert_response c.read_response, "HTTP/1.1 /#{i} "
    end
  ensure
    c&.close
  end

  # Told the idle timeout (keepalive_timeout 5 less a second's margin), a
  # client stops reusing a connection before the server closes it.
  def test_kept_alive_responses_advertise_the_idle_timeout
    c = server.connect
    c.write(get("/a"))
    assert_equal "timeout=4", c.read_response["keep-alive"]
    c.write(get("/b", version: "1.0", headers: "Connection: keep-alive\r\n"))
    assert_equal "timeout=4", c.read_response["keep-alive"]
    c.write(get("/c", headers: "Connection: close\r\n"))
    last = c.read_response
    assert_equal "close", last["connection"]
    assert_nil last["keep-alive"], "a closing response has no idle timeout"
    d = short.connect
    d.write(get("/d"))
    assert_nil d.read_response["keep-alive"], "keepalive_timeout 1 leaves no whole second to advertise"
  ensure
    c&.close
    d&.close
  end

  def test_connection_close_is_honoured
    ["close", "Close", "keep-alive, close"].each do |value|
      c = server.connect
      c.write(get("/", headers: "Connection: #{value}\r\n"))
      assert_response c.read_response, "HTTP/1.1 / ", connection: "close"
      assert c.closed?, "closed after Connection: #{value}"
    ensure
      c&.close
    end
  end

  def test_http10_closes_by_default
    c = server.connect
    c.write(get("/", version: "1.0"))
    assert_response c.read_response, "HTTP/1.0 / ", connection: "close"
    assert c.closed?
  ensure
    c&.close
  end

  def test_http10_keep_alive
    c = server.connect
    2.times do |i|
      c.write(get("/#{i}", version: "1.0", headers: "Connection: keep-alive\r\n"))
      assert_response c.read_response, "HTTP/1.0 /#{i} ", connection: "keep-alive"
    end
    c.write("POST /p HTTP/1.0\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nhi")
    assert_response c.read_response, "HTTP/1.0 /p hi", connection: "keep-alive"
    c.write(get("/last", version: "1.0"))
    assert_response c.read_response, "HTTP/1.0 /last ", connection: "close"
    assert c.closed?
  ensure
    c&.close
  end

  def test_pipelined_requests_are_answered_in_order
    c = server.connect
    post = ->(i) { "POST /#{i} HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n#{i}" }
    c.write((1..5).map { |i| i.even? ? get("/#{i}") : post.call(i) }.join)
    (1..5).each { |i| assert_response c.read_response, "HTTP/1.1 /#{i} #{i if i.odd?}" }
    c.write(get("/after"))
    assert_response c.read_response, "HTTP/1.1 /after "
  ensure
    c&.close
  end

  def test_nothing_is_answered_after_a_pipelined_connection_close
    c = server.connect
    c.write(get("/1") + get("/2", headers: "Connection: close\r\n") + get("/3"))
    assert_response c.read_response, "HTTP/1.1 /1 "
    assert_response c.read_response, "HTTP/1.1 /2 ", connection: "close"
    assert_equal "", c.read_to_eof
  ensure
    c&.close
  end

  def test_connection_closes_after_keepalive_requests
    c = short.connect
    2.times do |i|
      c.write(get("/#{i}"))
      assert_response c.read_response, "HTTP/1.1 /#{i} "
    end
    c.write(get("/last"))
    assert_response c.read_response, "HTTP/1.1 /last ", connection: "close"
    assert c.closed?
  ensure
    c&.close
  end

  def test_keepalive_requests_with_pipelining
    c = short.connect
    c.write((1..4).map { |i| get("/#{i}") }.join)
    assert_response c.read_response, "HTTP/1.1 /1 "
    assert_response c.read_response, "HTTP/1.1 /2 "
    assert_response c.read_response, "HTTP/1.1 /3 ", connection: "close"
    assert_equal "", c.read_to_eof
  ensure
    c&.close
  end

  # The timeout scenarios each wait about 1 s; they run side by side.
  def test_timeouts
    short # started before the threads share it
    threads = %i[idle_connection_closes_after_keepalive_timeout crlf_after_a_body_is_not_a_request
                 partial_head_times_out_with_408 partial_body_times_out_with_408
                 silent_connection_is_closed_after_client_timeout].map do |name|
      Thread.new do
        Thread.current.report_on_exception = false
        send(name)
      end
    end
    threads.each(&:join) # re-raises a failed assertion
  end

  # Timeouts are checked every 0.25 s.
  def assert_waited_about_one_second(since, what)
    waited = now - since
    assert_operator waited, :>=, 0.8, "#{what} too early"
    assert_operator waited, :<=, 2.0, "#{what} too late"
  end

  def idle_connection_closes_after_keepalive_timeout
    c = short.connect
    c.write(get("/1"))
    assert_response c.read_response, "HTTP/1.1 /1 "
    c.write(get("/2"))
    assert_response c.read_response, "HTTP/1.1 /2 " # still open right after a response
    idle_since = now
    assert_equal "", c.read_to_eof(3), "closed without a response"
    assert_waited_about_one_second(idle_since, "keep-alive close")
  ensure
    c&.close
  end

  # An empty line before a request line is ignored (RFC 9112 section 2.2):
  # it starts no request, so the connection idles out without a 408.
  def crlf_after_a_body_is_not_a_request
    c = short.connect
    c.write("POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi\r\n")
    assert_response c.read_response, "HTTP/1.1 /p hi"
    idle_since = now
    assert_equal "", c.read_to_eof(3), "closed without a response"
    assert_waited_about_one_second(idle_since, "keep-alive close")
  ensure
    c&.close
  end

  def assert_timed_out(client, started)
    r = client.read_response(timeout: 3)
    assert_equal "HTTP/1.1 408 Request Timeout", r.status_line
    assert_equal "close", r["connection"]
    assert_equal "text/plain", r["content-type"]
    assert_equal "Request Timeout\n", r.body
    assert_waited_about_one_second(started, "408")
    assert client.closed?
  end

  def partial_head_times_out_with_408
    c = short.connect
    started = now
    c.write("GET / HTTP/1.1\r\nHost: x\r\n")
    assert_timed_out(c, started)
  ensure
    c&.close
  end

  def partial_body_times_out_with_408
    c = short.connect
    c.write(get("/first"))
    assert_response c.read_response, "HTTP/1.1 /first "
    started = now
    c.write("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
    assert_timed_out(c, started)
  ensure
    c&.close
  end

  # The kernel holds it for tcp_defer_accept's 1 s first (on by default),
  # then client_timeout's header deadline runs from accept.
  def silent_connection_is_closed_after_client_timeout
    c = short.connect
    started = now
    assert_equal "", c.read_to_eof(4), "closed without a response"
    waited = now - started
    assert_operator waited, :>=, 1.8, "close of a silent connection too early"
    assert_operator waited, :<=, 3.5, "close of a silent connection too late"
  ensure
    c&.close
  end

  # --- clients that go away ---

  def assert_no_descriptor_left_and_still_serving
    srv = server
    idle = self.class.idle_fds.fetch(srv)
    wait_until(timeout: 5, message: "server descriptors back to #{idle}") { srv.connection_fds == idle }
    refute srv.exited?
    c = srv.connect
    c.write(get("/alive"))
    assert_response c.read_response, "HTTP/1.1 /alive "
    c.close
    refute_match(/internal error|app error/, srv.log)
  end

  def test_client_disconnects_in_the_middle_of_the_head
    c = server.connect
    c.write("GET / HTTP/1.1\r\nHo")
    c.close
    assert_no_descriptor_left_and_still_serving
  end

  def test_client_disconnects_in_the_middle_of_a_large_body
    c = server.connect
    c.write("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n#{'b' * 500_000}")
    c.close
    assert_no_descriptor_left_and_still_serving
  end

  def test_client_disconnects_in_the_middle_of_a_chunked_body
    c = server.connect
    c.write("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n#{"10000\r\n#{'c' * 65_536}\r\n" * 4}10")
    c.close
    assert_no_descriptor_left_and_still_serving
  end

  def test_client_resets_in_the_middle_of_a_body
    c = server.connect
    c.write("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n#{'b' * 300_000}")
    c.sock.setsockopt(Socket::SOL_SOCKET, Socket::SO_LINGER, [1, 0].pack("ii")) # close sends RST
    c.close
    assert_no_descriptor_left_and_still_serving
  end

  def test_client_disconnects_before_reading_a_large_response
    c = server.connect
    c.write(get("/big"))
    assert_equal "HTTP/1.1 200 OK", c.read_line
    c.close
    assert_no_descriptor_left_and_still_serving
  end

  def test_client_disconnects_without_reading_anything_of_a_large_response
    c = server.connect
    c.write(get("/big") + get("/big"))
    c.close
    assert_no_descriptor_left_and_still_serving
  end
end
