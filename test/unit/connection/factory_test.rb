# frozen_string_literal: true

require "test_helper"
require "support/fake_counters"
require "support/serving_limits"
require "support/kernel_stamps"
require "socket"
require "logger"
require "tmpdir"

# Connections a listener's Factory makes: accepted in Ruby (#call), or
# accepted and first served by the thread's RequestLoop (#accept_served),
# over real listening sockets. What the client reads, what the reactor is
# told, and which Request served whom.
class ConnectionFactoryTest < Minitest::Test
  include ServingLimits
  include Narwhal::KernelStamps

  CLOSE = "GET /a HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
  KEEP = "GET /k HTTP/1.1\r\nHost: h\r\n\r\n"
  DEADLINE = 5

  # The scoreboard's thread slot, as the loop reports to it.
  class NullSlot
    def request_started(_method, _path, _fd = -1); end

    def responding!; end

    def request_finished; end

    def queue_time(_seconds, _kind); end
  end

  def setup
    @seen = [] # [REMOTE_ADDR, the env's rack.hijack] per request
    @app = lambda do |env|
      @seen << [env["REMOTE_ADDR"], env["rack.hijack"]]
      [200, { "content-type" => "text/plain" }, ["hi #{env['PATH_INFO']}"]]
    end
    @clients = []
    @listeners = []
  end

  def teardown
    @clients.each { |c| c.close unless c.closed? }
    @listeners.each(&:close)
  end

  def factory(address = "127.0.0.1:0", access_log: nil, queue_deadline: nil)
    @listener = Narwhal::Listener.new(address)
    @listeners << @listener
    @log = StringIO.new
    log = Logger.new(@log)
    @responder_counters = FakeCounters.new
    responder = Narwhal::Responder.new(->(env) { @app.call(env) }, log, NullSlot.new, @responder_counters,
                                       access_log: access_log, queue_deadline: queue_deadline)
    limits = LIMITS.dup.tap { |l| l.queue_deadline = queue_deadline }.freeze
    context = Narwhal::Connection::Context.new(limits, Narwhal::Dispatcher::Inline.new(responder), log,
                                               FakeCounters.new, false)
    @counters = FakeCounters.new
    Narwhal::Connection::Factory.new(@listener, TEMPLATE, context, @counters, budget: nil, early_hints: false,
                                     threaded: false, counting: !access_log.nil?)
  end

  def connect(bytes = nil)
    io = @listener.io
    client = io.is_a?(UNIXServer) ? UNIXSocket.new(io.path) : Socket.tcp(*tcp_address)
    @clients << client
    client.write(bytes) if bytes
    wait_for_connection
    client
  end

  def tcp_address
    addr = @listener.io.local_address
    [addr.ip_address, addr.ip_port]
  end

  # accept_served takes what is in the listen queue: the client's
  # connection (and its bytes) must be there first.
  def wait_for_connection
    assert IO.select([@listener.io], nil, nil, DEADLINE), "the connection reached the listen queue"
  end

  # Everything the server sends until it closes (or DEADLINE).
  def read_to_eof(client)
    out = +""
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + DEADLINE
    while (left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)).positive?
      break unless client.wait_readable(left)

      chunk = client.read_nonblock(65_536, exception: false)
      break if chunk.nil?

      out << chunk if chunk.is_a?(String)
    end
    out
  end

  def read_response(client)
    head = +""
    head << client.readpartial(4096) until head.include?("\r\n\r\n") && head.end_with?("hi /k")
    head
  end

  def accepted_count
    @counters.counts[Narwhal::Scoreboard::CONNECTIONS_ACCEPTED]
  end

  # The loop takes the kernel's queue time itself: a request whose bytes
  # waited past queue_deadline in the listen queue is answered 503 there,
  # without the app; one that did not is served.
  def test_a_request_that_waited_past_queue_deadline_is_shed_by_the_loop
    wait_for_kernel_stamps
    f = factory(queue_deadline: 0.1)
    late = connect(CLOSE)
    sleep 0.15 # the wait under measure
    connection, _fd, action = f.accept_served
    assert_equal :close, action
    connection.close
    got = read_to_eof(late)
    assert_match(%r{\AHTTP/1.1 503 Service Unavailable\r\n.*retry-after: 1\r\n.*connection: close\r\n}m, got)
    assert_empty @seen, "the app never saw it"
    assert_equal 1, @responder_counters.counts[Narwhal::Scoreboard::REQUESTS_SHED_QUEUE]
    assert_match(%r{shed 1 request\(s\) past queue_deadline 0.1s with 503, the last GET /a after 0\.1}, @log.string)
    on_time = connect(CLOSE)
    assert_equal false, f.accept_served
    assert_match(%r{\AHTTP/1.1 200 OK}, read_to_eof(on_time))
  end

  def test_a_connection_closed_after_its_request_is_answered_and_closed_with_no_connection_made
    f = factory
    client = connect(CLOSE)
    assert_equal false, f.accept_served, "served and closed by the loop"
    got = read_to_eof(client)
    assert_match(%r{\AHTTP/1.1 200 OK\r\n.*connection: close\r\n\r\nhi /a\z}m, got)
    assert_equal [["127.0.0.1", @seen[0][1]]], @seen
    assert_equal 1, accepted_count
  end

  def test_the_next_connection_is_served_with_the_same_request_and_its_own_address
    f = factory
    2.times do
      client = connect(CLOSE)
      assert_equal false, f.accept_served
      assert_match(/hi \/a\z/, read_to_eof(client))
    end
    assert_equal 2, @seen.size
    assert_same @seen[0][1], @seen[1][1], "one Request served both (env's rack.hijack is the Request)"
    assert_equal ["127.0.0.1"], @seen.map(&:first).uniq
  end

  def test_an_ipv6_client_gets_its_address
    f = factory("[::1]:0")
    client = connect("GET /a HTTP/1.0\r\n\r\n")
    assert_equal false, f.accept_served
    assert_match(/hi \/a\z/, read_to_eof(client))
    assert_equal "::1", @seen[0][0]
  end

  def test_a_unix_socket_client_gets_the_unix_remote_addr
    Dir.mktmpdir do |dir|
      f = factory(File.join(dir, "s.sock"))
      client = connect(CLOSE)
      assert_equal false, f.accept_served
      assert_match(/hi \/a\z/, read_to_eof(client))
      assert_equal Narwhal::Listener::UNIX_REMOTE_ADDR, @seen[0][0]
    end
  end

  def test_nothing_waiting_is_nil
    f = factory
    assert_nil f.accept_served
    assert_equal 0, accepted_count
  end

  def test_a_kept_alive_connection_is_held_as_a_connection_that_serves_its_next_request
    f = factory
    client = connect(KEEP)
    conn, fd, action = f.accept_served
    assert_instance_of Narwhal::Connection, conn
    assert_equal :keep, action
    assert_kind_of Integer, fd
    assert conn.idle?, "waiting for its next request"
    assert_match(/\AHTTP\/1.1 200 OK\r\n.*hi \/k\z/m, read_response(client))
    client.write(KEEP)
    assert conn.request.out.io.wait_readable(DEADLINE)
    assert_equal :keep, conn.on_readable
    assert_match(/hi \/k\z/, read_response(client))
    assert_equal [["127.0.0.1", @seen[0][1]], ["127.0.0.1", @seen[0][1]]], @seen
    # the next connection gets a Request of its own
    other = connect(CLOSE)
    assert_equal false, f.accept_served
    assert_match(/hi \/a\z/, read_to_eof(other))
    refute_same @seen[0][1], @seen[2][1]
    conn.close
  end

  def test_a_connection_that_sent_nothing_yet_waits_as_a_new_connection
    f = factory
    client = connect
    conn, _fd, action = f.accept_served
    assert_equal :keep, action
    assert conn.silent?, "a new connection, not an idle one"
    client.write(CLOSE)
    assert conn.request.out.io.wait_readable(DEADLINE)
    assert_equal :close, conn.on_readable
    assert_match(/hi \/a\z/, read_to_eof(client.tap { conn.close }))
  end

  # A connection whose first bytes the loop could not serve: accepted,
  # it waits (KEEP) until the rest comes, then Ruby finishes it.
  def finished_when_the_rest_comes(first, rest)
    f = factory
    client = connect(first)
    conn, _fd, action = f.accept_served
    assert_equal :keep, action, "waits for the rest"
    client.write(rest)
    assert conn.request.out.io.wait_readable(DEADLINE)
    [client, conn, conn.on_readable]
  end

  def test_a_head_that_arrives_in_two_parts_is_finished_in_ruby_when_the_rest_comes
    client, conn, action = finished_when_the_rest_comes("GET /k HTTP/1.1\r\n", "Host: h\r\n\r\n")
    assert_equal :keep, action
    assert_match(/hi \/k\z/, read_response(client))
    conn.close
  end

  POST = "POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nConnection: close\r\n\r\n"

  def test_a_request_with_a_body_is_finished_in_ruby_with_the_body_or_after_it
    @app = ->(env) { [200, {}, ["got #{env['rack.input'].read}"]] }
    f = factory
    with_head = connect("#{POST}hello")
    conn, _fd, action = f.accept_served
    assert_equal :close, action, "read, run and answered at once"
    after_head, later, action = finished_when_the_rest_comes(POST, "hello")
    assert_equal :close, action
    [conn, later].each(&:close)
    [with_head, after_head].each { |client| assert_match(/\r\n\r\ngot hello\z/, read_to_eof(client)) }
  end

  def test_pipelined_requests_on_a_new_connection_are_all_answered_in_order
    f = factory
    @app = ->(env) { [200, {}, [env["PATH_INFO"]]] }
    client = connect("GET /1 HTTP/1.1\r\nHost: h\r\n\r\nGET /2 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
    assert_equal false, f.accept_served
    got = read_to_eof(client)
    assert_equal 2, got.scan("HTTP/1.1 200 OK").size
    assert_match(%r{/1HTTP/1.1 200 OK.*/2\z}m, got)
  end

  def test_a_hijacked_first_request_leaves_the_socket_to_the_app
    f = factory
    taken = nil
    @app = lambda do |env|
      taken = env["rack.hijack"].call
      [200, {}, []]
    end
    client = connect(CLOSE)
    _conn, _fd, action = f.accept_served
    assert_equal :release, action
    taken.write("HTTP/1.1 204 No Content\r\n\r\n")
    taken.close
    assert_equal "HTTP/1.1 204 No Content\r\n\r\n", read_to_eof(client)
  end

  def test_an_exception_that_unwinds_the_loop_closes_the_new_connection
    f = factory
    @app = ->(_env) { raise Interrupt }
    client = connect(CLOSE)
    assert_raises(Interrupt) { f.accept_served }
    assert_equal "", read_to_eof(client), "closed, not left open with no owner"
    # the Request it had is not reused half-way through a request
    @app = ->(env) { [200, {}, [env["PATH_INFO"]]] }
    other = connect(CLOSE)
    assert_equal false, f.accept_served
    assert_match(%r{\r\n\r\n/a\z}, read_to_eof(other))
  end

  def test_without_a_request_loop_the_caller_accepts_in_ruby
    lines = []
    log = Object.new # the access log: every request goes through Ruby
    log.define_singleton_method(:record) { |env, status, *| lines << [env["PATH_INFO"], status] }
    f = factory(access_log: log)
    client = connect(CLOSE)
    assert_equal Narwhal::Connection::Factory::UNSERVED, f.accept_served
    conn = f.call(@listener.accept_nonblock)
    assert_equal :close, conn.on_readable
    conn.close
    assert_match(/hi \/a\z/, read_to_eof(client))
    assert_equal [["/a", 200]], lines
    assert_equal 1, accepted_count
  end
end
