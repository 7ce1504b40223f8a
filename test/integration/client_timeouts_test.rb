# frozen_string_literal: true

require "test_helper"
require "json"
require "support/slowloris"

# The reading deadlines seen from slow clients: a total for the head
# (client_header_timeout), progress for the body (client_body_timeout),
# deferred accept for silent connections, and many slow clients at once
# beside a fast one.
class ClientTimeoutsTest < Minitest::Test
  # The body it was given and when it was called (CLOCK_MONOTONIC is the
  # machine's: the test compares it with its own).
  APP = <<~RU
    run lambda { |env|
      called_at = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      text = "\#{called_at} \#{env['rack.input'].read}"
      [200, { "content-type" => "text/plain", "content-length" => text.bytesize.to_s }, [text]]
    }
  RU

  READING = "client_header_timeout 1\nclient_body_timeout 1\n"
  NO_DEFER = "listen '127.0.0.1:0', tcp_defer_accept: false\nclient_header_timeout 1\n"
  SLOWLORIS = "worker_processes 2\nclient_header_timeout 2\nclient_body_timeout 1\n"

  HEADER_TRICKLERS = 500
  BODY_TRICKLERS = 200
  BODY_TRICKLE_SECONDS = 3.0 # longer than both timeouts of SLOWLORIS
  FAST_P99_BOUND = 0.5

  # Started side by side at the first test, stopped after the run.
  def self.servers
    @servers ||= begin
      started = {
        reading: Narwhal::ServerProcess.new(app: APP, config: READING),
        no_defer: Narwhal::ServerProcess.new(app: APP, config: NO_DEFER, listen: nil),
        slowloris: Narwhal::ServerProcess.new(app: APP, config: SLOWLORIS)
      }
      started.each_value(&:stop_after_run)
      started.each { |name, s| s.wait_ready(workers: name == :slowloris ? 2 : 1) }
    end
  end

  def server(name)
    self.class.servers.fetch(name)
  end

  def now
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  def assert_between(low, high, value, what)
    assert_operator value, :>=, low, "#{what}: #{value.round(3)}s, expected at least #{low}s"
    assert_operator value, :<=, high, "#{what}: #{value.round(3)}s, expected at most #{high}s"
  end

  # Each scenario waits about a second or three; they run side by side.
  def test_reading_deadlines
    server(:reading)
    server(:no_defer)
    threads = %i[trickled_head_gets_408_at_the_header_deadline steady_body_is_served_whole_after_its_last_byte
                 steady_chunked_body_is_served_whole stalled_body_gets_408
                 silent_connection_is_handed_over_after_the_defer_then_closed
                 silent_connection_without_defer_closes_at_the_header_deadline].map do |name|
      Thread.new do
        Thread.current.report_on_exception = false
        send(name)
      end
    end
    threads.each(&:join) # re-raises a failed assertion
  end

  # Sends bytes one at a time, `gap` seconds apart, stopping early if the
  # server answers; returns when the last byte was about to be sent (the
  # server cannot have it before that).
  def trickle(client, bytes, gap)
    last = nil
    bytes.each_char do |c|
      break if client.sock.wait_readable(gap)

      last = now
      client.write(c)
    end
    last
  end

  def trickled_head_gets_408_at_the_header_deadline
    c = server(:reading).connect
    c.sock.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1)
    started = now
    c.write("GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    sent = 0
    until c.sock.wait_readable(0.2) || now - started > 5
      c.write("a")
      sent += 1
    end
    r = c.read_response(timeout: 1)
    assert_equal "HTTP/1.1 408 Request Timeout", r.status_line
    assert_equal "close", r["connection"]
    assert_between 0.9, 2.0, now - started, "408 to a trickled head"
    assert_operator sent, :>=, 3, "it kept sending while it waited"
  ensure
    c&.close
  end

  # 15 body bytes 0.2 s apart: 3 s in all, more than both timeouts.
  def steady_body_is_served_whole_after_its_last_byte
    c = server(:reading).connect
    c.sock.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1)
    body = "abcdefghijklmno"
    started = now
    c.write("POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: #{body.bytesize}\r\n\r\n")
    last_sent = trickle(c, body, 0.2)
    r = c.read_response(timeout: 3)
    assert_equal 200, r.status, r.body
    called_at, echoed = r.body.split(" ", 2)
    assert_equal body, echoed
    assert_operator now - started, :>=, 2.5, "took longer than either timeout"
    assert_operator Float(called_at), :>=, last_sent, "the app was called after the last byte was sent"
  ensure
    c&.close
  end

  def steady_chunked_body_is_served_whole
    c = server(:reading).connect
    c.sock.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1)
    c.write("POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    last_sent = trickle(c, "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", 0.12) # 2.6 s
    r = c.read_response(timeout: 3)
    assert_equal 200, r.status, r.body
    called_at, echoed = r.body.split(" ", 2)
    assert_equal "abcde", echoed
    assert_operator Float(called_at), :>=, last_sent
  ensure
    c&.close
  end

  def stalled_body_gets_408
    c = server(:reading).connect
    c.sock.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1)
    c.write("POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n")
    last_sent = trickle(c, "abcd", 0.3)
    r = c.read_response(timeout: 4)
    assert_equal "HTTP/1.1 408 Request Timeout", r.status_line
    assert_between 0.9, 2.0, now - last_sent, "408 after the body stalled"
    assert c.closed?
  ensure
    c&.close
  end

  # The server side's state of the client's connection, from /proc/net/tcp
  # (what `ss -tn` shows): "03" is SYN-RECV, "01" ESTABLISHED.
  def server_side_state(srv, client)
    local = format(":%04X", srv.port)
    remote = format(":%04X", client.sock.local_address.ip_port)
    File.foreach("/proc/net/tcp") do |line|
      fields = line.split
      return fields[3] if fields[1].end_with?(local) && fields[2].end_with?(remote)
    end
    nil
  end

  # tcp_defer_accept (on by default, 1 s): the kernel keeps a silent
  # connection to itself for about a second, then hands it over anyway; it
  # ends at the header deadline, without a response (nothing was asked).
  def silent_connection_is_handed_over_after_the_defer_then_closed
    srv = server(:reading)
    c = srv.connect
    started = now
    assert_equal "03", server_side_state(srv, c), "held by the kernel (SYN-RECV) at first"
    wait_until(timeout: 5, message: "the kernel hands the connection over") { server_side_state(srv, c) == "01" }
    assert_between 0.8, 2.5, now - started, "handed over after the defer"
    assert_equal "", c.read_to_eof(5), "closed without a response"
    assert_between 1.8, 3.5, now - started, "closed at defer + client_header_timeout"
  ensure
    c&.close
  end

  def silent_connection_without_defer_closes_at_the_header_deadline
    srv = server(:no_defer)
    c = srv.connect
    started = now
    assert_equal "", c.read_to_eof(5), "closed without a response"
    assert_between 0.9, 1.8, now - started, "closed at client_header_timeout"
  ensure
    c&.close
  end

  # 500 connections trickling heads and 200 trickling bodies (one process,
  # non-blocking sockets) against 2 workers; meanwhile a fast client sends
  # one request per connection.
  def test_slowloris_does_not_slow_a_fast_client_and_ends_at_the_deadlines
    srv = server(:slowloris)
    ensure_descriptors(HEADER_TRICKLERS + BODY_TRICKLERS + 200)
    loris = IO.popen([RbConfig.ruby, File.expand_path("../support/slowloris.rb", __dir__), srv.host, srv.port.to_s,
                      HEADER_TRICKLERS.to_s, BODY_TRICKLERS.to_s, BODY_TRICKLE_SECONDS.to_s, "10"])
    assert loris.wait_readable(15), "slow clients connected"
    assert_equal "connected", loris.gets&.chomp
    latencies = fast_requests_until_readable(srv, loris, limit: 15)
    records = JSON.parse(loris.read, symbolize_names: true)
    assert_fast(latencies)
    assert_heads_ended_at_the_header_deadline(records.select { |r| r[:kind] == "header" })
    assert_bodies_ended_once_stalled(records.select { |r| r[:kind] == "body" })
  ensure
    if loris
      Process.kill(:KILL, loris.pid) unless loris.closed? || Process.waitpid(loris.pid, Process::WNOHANG)
      loris.close unless loris.closed?
    end
  end

  # Raises the soft descriptor limit when it is short (the slow clients'
  # process and the server's workers inherit it).
  def ensure_descriptors(needed)
    soft, hard = Process.getrlimit(:NOFILE)
    return if soft >= needed

    skip "needs #{needed} descriptors, hard limit #{hard}" if hard < needed
    Process.setrlimit(:NOFILE, needed, hard)
  end

  # Sequential requests, a new connection each, until io is readable (2 ms
  # apart: enough for a p99 without flooding a shared machine).
  def fast_requests_until_readable(srv, io, limit:)
    latencies = []
    deadline = now + limit
    until io.wait_readable(0.002) || now > deadline
      started = now
      c = srv.connect
      c.write("GET /fast HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
      r = c.read_response(timeout: 5)
      latencies << (now - started)
      assert_equal 200, r.status, "a fast request among slow clients"
      c.close
    end
    latencies
  end

  def assert_fast(latencies)
    assert_operator latencies.size, :>=, 20, "fast requests sent while the slow clients ran"
    p99 = latencies.sort[(latencies.size * 0.99).ceil - 1]
    assert_operator p99, :<=, FAST_P99_BOUND,
                    "fast client's p99 among slow clients (#{latencies.size} requests; p50 " \
                    "#{latencies.sort[latencies.size / 2].round(4)}s)"
  end

  # Each got 408 about 2 s after it connected, while it was still sending.
  def assert_heads_ended_at_the_header_deadline(records)
    assert_equal HEADER_TRICKLERS, records.size
    assert_equal [408], records.map { |r| r[:status] }.uniq, "every trickled head is answered 408"
    waited = records.map { |r| r[:answered] - r[:connected] }
    assert_between 1.9, 4.0, waited.min, "earliest 408 after connecting"
    assert_between 1.9, 4.0, waited.max, "latest 408 after connecting"
    assert_operator records.map { |r| r[:sent] - Slowloris::HEAD_START.bytesize }.min, :>=, 4,
                    "each kept sending head bytes until its 408"
  end

  # Each was answered 408 only after it stopped sending body bytes (having
  # sent them for longer than both timeouts), about 1 s later.
  def assert_bodies_ended_once_stalled(records)
    assert_equal BODY_TRICKLERS, records.size
    assert_equal [408], records.map { |r| r[:status] }.uniq, "every stalled body is answered 408"
    sending = records.map { |r| r[:last_sent] - r[:connected] }
    assert_operator sending.min, :>=, BODY_TRICKLE_SECONDS - 0.5, "bodies kept moving past both timeouts"
    after_stall = records.map { |r| r[:answered] - r[:last_sent] }
    assert_between 0.9, 2.5, after_stall.min, "earliest 408 after a body stalled"
    assert_between 0.9, 2.5, after_stall.max, "latest 408 after a body stalled"
  end
end
