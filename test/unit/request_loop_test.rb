# frozen_string_literal: true

require "test_helper"
require "support/fake_counters"
require "support/serving_limits"
require "support/request_stream"
require "socket"
require "logger"
require "tmpdir"
require "fileutils"

# The C request loop behind a Connection, over a socket pair: what the
# client reads, what the reactor is told, and which requests went back to
# Ruby (Responder#respond) or were finished there (#respond_returned).
class RequestLoopTest < Minitest::Test
  include ServingLimits

  GET = "GET /a?x=1 HTTP/1.1\r\nHost: example.com\r\n\r\n"

  # Counts how each request was answered.
  class CountingResponder < Narwhal::Responder
    attr_reader :in_ruby, :finished_in_ruby

    def initialize(*, **)
      super
      @in_ruby = 0
      @finished_in_ruby = 0
    end

    def respond(request)
      @in_ruby += 1
      super
    end

    def respond_returned(request, result, error)
      @finished_in_ruby += 1
      super
    end
  end

  class FakeSlot
    attr_reader :marks

    def initialize
      @marks = []
    end

    def request_started(method, path, _fd = -1)
      @marks << [:started, method, path]
    end

    def responding!; end

    def request_finished
      @marks << :finished
    end
  end

  def setup
    @server, @client = UNIXSocket.pair
    @log = StringIO.new
    @slot = FakeSlot.new
    @seen = []
    @app = lambda do |env|
      @seen << env["PATH_INFO"]
      [200, { "content-type" => "text/plain" }, ["hi #{env['PATH_INFO']}"]]
    end
  end

  def teardown
    [@server, @client].each { |s| s.close unless s.closed? }
    @fuzz_listener&.close
    FileUtils.rm_rf(@fuzz_dir) if @fuzz_dir
  end

  def connection(keepalive_requests: 100, access_log: nil, budget: nil, load_report: nil)
    limits = LIMITS.dup
    limits.keepalive_requests = keepalive_requests
    @responder = CountingResponder.new(->(env) { @app.call(env) }, Logger.new(@log), @slot, FakeCounters.new,
                                       access_log: access_log, keep_alive: "keep-alive: timeout=4\r\n",
                                       load_report: load_report)
    dispatcher = Narwhal::Dispatcher::Inline.new(@responder)
    @context = Narwhal::Connection::Context.new(limits, dispatcher, Logger.new(@log), FakeCounters.new, false)
    out = (access_log ? Narwhal::SocketWriter::Counting : Narwhal::SocketWriter).new(@server, 5, budget)
    @request = Narwhal::Request.new(TEMPLATE, out, "10.0.0.1", false, @context) # as Connection::Factory makes it
    Narwhal::Connection.new(@server, @request, @context)
  end

  # A new client of the same server (and thread) as the last #connection.
  def next_connection
    @server, @client = UNIXSocket.pair
    @request = Narwhal::Request.new(TEMPLATE, Narwhal::SocketWriter.new(@server, 5), "10.0.0.2", false, @context)
    Narwhal::Connection.new(@server, @request, @context)
  end

  def send_bytes(conn, bytes)
    @client.write(bytes)
    conn.on_readable
  end

  # What the client got, once the server side has nothing more to send.
  def responses
    out = +""
    while (chunk = @client.read_nonblock(65_536, exception: false)).is_a?(String)
      out << chunk
    end
    out
  end

  def test_a_kept_alive_request_is_served_in_c_and_the_connection_waits
    conn = connection
    assert_equal :keep, send_bytes(conn, GET)
    assert_match(%r{\AHTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n.*content-length: 5\r\nkeep-alive: timeout=4\r\n\r\nhi /a\z}m,
                 responses)
    assert_equal 0, @responder.in_ruby + @responder.finished_in_ruby
    assert_equal [[:started, "GET", "/a"], :finished], @slot.marks
    assert conn.idle?, "kept alive, waiting for the next request"
    assert_nil @request.env, "the request was finished"
  end

  def test_pipelined_requests_are_answered_in_order_from_one_read
    conn = connection
    assert_equal :keep, send_bytes(conn, "GET /1 HTTP/1.1\r\nHost: h\r\n\r\nGET /2 HTTP/1.1\r\nHost: h\r\n\r\n")
    got = responses
    assert_equal 2, got.scan("HTTP/1.1 200 OK").size
    assert_operator got.index("hi /1"), :<, got.index("hi /2")
    assert_equal %w[/1 /2], @seen
  end

  # orca_load_report: the line is in the loop's responses and in those
  # Ruby writes (a body to read), once each.
  def test_the_load_report_is_in_responses_served_in_c_and_in_ruby
    report = Narwhal::LoadReport.new(Narwhal::Scoreboard.new(1, threads: 1), 0, 1)
    conn = connection(load_report: report)
    assert_equal :keep, send_bytes(conn, GET)
    assert_equal :keep, send_bytes(conn, "POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhi")
    assert_equal 1, @responder.in_ruby
    heads = responses.split(/(?=HTTP\/1\.1 )/)
    assert_equal 2, heads.size
    heads.each { |head| assert_equal 1, head.scan(/^endpoint-load-metrics: TEXT application_utilization=/).size, head }
  end

  def test_a_request_with_a_body_is_left_to_ruby_whole
    @app = ->(env) { [200, {}, ["#{env['PATH_INFO']} #{env['rack.input'].read}"]] }
    conn = connection
    assert_equal :keep, send_bytes(conn, "POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello")
    assert_match(%r{\r\n\r\n/p hello\z}, responses)
    assert_equal 1, @responder.in_ruby
    # the read buffer Ruby used (and took the body from) is the loop's again
    assert_equal :keep, send_bytes(conn, "#{GET}#{GET}")
    assert_equal 2, responses.scan("/a ").size
    assert_equal 1, @responder.in_ruby
  end

  def test_a_head_split_across_reads_is_finished_by_ruby
    conn = connection
    assert_equal :keep, send_bytes(conn, "GET /split HTTP/1.1\r\nHo")
    assert_equal "", responses
    assert_equal :keep, send_bytes(conn, "st: h\r\n\r\n")
    assert_match(/hi \/split\z/, responses)
    assert_equal 1, @responder.in_ruby
    # the next request is the loop's again
    assert_equal :keep, send_bytes(conn, GET)
    assert_match(/hi \/a\z/, responses)
    assert_equal 1, @responder.in_ruby
  end

  def test_after_ruby_served_pipelined_requests_the_loop_reads_into_the_same_buffer
    conn = connection
    assert_equal :keep, send_bytes(conn, "GET /1 HTTP/1.1\r\nHost: h\r\n\r\nGET /2 HTTP/1.1\r\nHo")
    # Ruby finishes /2 and serves /3 behind it, dropping /2's bytes from
    # the front of the buffer, which leaves it sharing its bytes
    assert_equal :keep, send_bytes(conn, "st: h\r\n\r\nGET /3 HTTP/1.1\r\nHost: h\r\n\r\n")
    assert_equal :keep, send_bytes(conn, "GET /4 HTTP/1.1\r\nHost: h\r\n\r\n")
    assert_equal %w[/1 /2 /3 /4], @seen
    assert_equal 4, responses.scan("HTTP/1.1 200 OK").size
  end

  def test_a_malformed_request_gets_its_400_from_ruby
    conn = connection
    assert_equal :keep, send_bytes(conn, "GET / HTTP/1.1\r\nBad Header\r\n\r\n") # lingers
    assert_match(%r{\AHTTP/1.1 400 }, responses)
    assert_equal 0, @responder.in_ruby
  end

  def test_an_app_that_raises_gets_a_500_from_the_responder
    @app = ->(_env) { raise ArgumentError, "boom" }
    conn = connection
    assert_equal :close, send_bytes(conn, GET)
    assert_match(%r{\AHTTP/1.1 500 }, responses)
    assert_equal 1, @responder.finished_in_ruby
    assert_match(/app error: ArgumentError: boom \(GET \/a\)/, @log.string)
    assert_equal :finished, @slot.marks.last
  end

  def test_an_exception_that_is_not_the_apps_error_unwinds_with_the_slot_finished
    @app = ->(_env) { raise Interrupt }
    conn = connection
    @client.write(GET)
    assert_raises(Interrupt) { conn.on_readable }
    assert_equal :finished, @slot.marks.last
  end

  # One parser serves every connection of the loop's thread: what a
  # request cut short by an unwinding exception left in it is not the next
  # connection's.
  def test_after_an_exception_unwound_the_loop_the_next_connection_is_parsed_afresh
    calls = 0
    @app = lambda do |env|
      raise Interrupt if (calls += 1) == 1

      [200, { "content-length" => env["PATH_INFO"].bytesize.to_s }, [env["PATH_INFO"]]]
    end
    conn = connection
    @client.write("GET /first HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n\r\n")
    assert_raises(Interrupt) { conn.on_readable }
    conn = next_connection
    assert_equal :keep, send_bytes(conn, "GET /second HTTP/1.1\r\nHost: y\r\n\r\n")
    assert_match(%r{\AHTTP/1.1 200 OK\r\n.*\r\n\r\n/second\z}m, responses)
  end

  def test_a_body_that_is_not_a_plain_array_is_written_by_ruby_and_closed
    closed = []
    body = Object.new
    body.define_singleton_method(:each) { |&b| %w[a b c].each(&b) }
    body.define_singleton_method(:close) { closed << true }
    @app = ->(_env) { [200, { "content-length" => "3" }, body] }
    conn = connection
    assert_equal :keep, send_bytes(conn, GET)
    assert_match(/\r\n\r\nabc\z/, responses)
    assert_equal [true], closed
    assert_equal 1, @responder.finished_in_ruby
  end

  def test_response_callbacks_are_run_by_the_responder
    ran = []
    @app = lambda do |env|
      env["rack.response_finished"] << ->(_env, status, _headers, error) { ran << [status, error] }
      env["rack.after_reply"] << -> { ran << :after }
      [204, {}, []]
    end
    conn = connection
    assert_equal :keep, send_bytes(conn, GET)
    assert_match(%r{\AHTTP/1.1 204 }, responses)
    assert_equal [[204, nil], :after], ran
  end

  def test_connection_close_and_http_1_0_end_the_connection
    conn = connection
    assert_equal :close, send_bytes(conn, "GET /c HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
    assert_match(/connection: close\r\n/, responses)
    conn2 = connection
    assert_equal :close, send_bytes(conn2, "GET /old HTTP/1.0\r\n\r\n")
    assert_match(%r{\AHTTP/1.1 200 OK\r\n.*connection: close\r\n}m, responses)
  end

  def test_the_last_request_keepalive_requests_allows_says_close
    conn = connection(keepalive_requests: 2)
    assert_equal :keep, send_bytes(conn, GET)
    refute_match(/connection: close/, responses)
    assert_equal :close, send_bytes(conn, GET)
    assert_match(/connection: close\r\n/, responses)
  end

  def test_a_response_the_socket_does_not_take_whole_is_finished_by_the_responder
    @server.setsockopt(Socket::SOL_SOCKET, Socket::SO_SNDBUF, 4096)
    big = "x" * 12_000
    @app = ->(_env) { [200, {}, [big]] }
    conn = connection
    @client.write(GET)
    reader = Thread.new do
      got = +""
      got << @client.readpartial(65_536) until got.end_with?(big)
      got
    end
    assert_equal :keep, conn.on_readable
    assert_match(/content-length: 12000\r\n.*\r\n\r\n#{big}\z/m, reader.value)
    assert_equal [[:started, "GET", "/a"], :finished], @slot.marks
  end

  def test_a_response_the_responder_spools_is_sent_for_its_request
    @server.setsockopt(Socket::SOL_SOCKET, Socket::SO_SNDBUF, 4096)
    body = Object.new
    body.define_singleton_method(:each) { |&b| 10.times { b.call("y" * 10_000) } }
    @app = ->(_env) { [200, {}, body] }
    conn = connection(budget: Narwhal::SocketWriter::SpoolBudget.new(1 << 20, 16_384))
    assert_equal :write, send_bytes(conn, GET)
    assert_equal :close, conn.on_timeout
    assert_match(%r{write timeout: client took no data for 5s, closing \(GET /a\)}, @log.string)
  end

  def test_a_new_connection_with_nothing_to_read_keeps_its_deadline_from_accept
    conn = connection
    accepted_deadline = conn.deadline
    assert_equal :keep, conn.on_readable
    assert_equal accepted_deadline, conn.deadline
  end

  # The same bytes, read in the same pieces, through a connection with the
  # loop and through one without it (every request on the Ruby path): the
  # client must read the same bytes and the app see the same requests.
  # NARWHAL_LOOP_FUZZ_SECONDS runs it that long (rake fuzz:loop), else 300
  # streams; a failure names the seed that replays it.
  def test_the_loop_answers_every_stream_as_the_ruby_path_does
    seed = Integer(ENV.fetch("NARWHAL_LOOP_FUZZ_SEED", Random.new_seed % 1_000_000))
    seconds = ENV["NARWHAL_LOOP_FUZZ_SECONDS"]&.to_f
    deadline = seconds && (Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds)
    random = Random.new(seed)
    streams = 0
    while deadline ? Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline : streams < 300
      stream = RequestStream.new(random)
      bytes = stream.bytes
      sizes = stream.splits(bytes.bytesize)
      without = replay(bytes, sizes, loop: false)
      with_loop = replay(bytes, sizes, loop: true)
      assert_equal without, with_loop, "seed #{seed}, stream #{streams}: #{bytes.inspect} in #{sizes.inspect}"
      accepted = replay(bytes, sizes, loop: :accept)
      assert_equal without, accepted,
                   "accepted by the loop: seed #{seed}, stream #{streams}: #{bytes.inspect} in #{sizes.inspect}"
      streams += 1
    end
    puts "request loop: #{streams} streams, seed #{seed}" if deadline
  end

  # A responder that leaves every request to the Ruby path.
  class RubyOnlyResponder < Narwhal::Responder
    def request_loop; end
  end

  FUZZ_APP = lambda do |env|
    seen = env.select { |_k, v| v.is_a?(String) }.merge("body" => env["rack.input"].read)
    env["fuzz.seen"] << seen
    case env["PATH_INFO"]
    when "/plain" then [200, { "content-type" => "text/plain" }, ["plain #{seen['QUERY_STRING']} #{seen['body']}"]]
    when "/each" then [200, {}, Enumerator.new { |y| y << "a" << "b" }]
    when "/raise" then raise "boom"
    when "/big" then [200, {}, ["b" * 20_000]]
    when "/callbacks"
      env["rack.response_finished"] << ->(*) { env["fuzz.seen"] << :finished }
      [200, {}, ["cb"]]
    when "/hijack" then [200, { "connection" => "close" }, ["no"]]
    when "/head204" then [204, {}, []]
    when "/bad_header" then [200, { "x-bad" => "a\nb" }, ["x"]]
    when "/string_status" then ["201", {}, ["s"]]
    else [200, {}, ["root"]]
    end
  end

  # What the client read (the date masked), what the app saw, and the
  # connection's last answer. loop: :accept, the connection is accepted by
  # the loop with the first bytes waiting (Connection::Factory#accept_served).
  def replay(bytes, sizes, loop:)
    seen = []
    log = StringIO.new
    klass = loop ? Narwhal::Responder : RubyOnlyResponder
    @board ||= Narwhal::Scoreboard.new(1)
    responder = klass.new(FUZZ_APP, Logger.new(log), @board.thread_slot(0, 0), FakeCounters.new,
                          keep_alive: "keep-alive: timeout=4\r\n")
    context = Narwhal::Connection::Context.new(LIMITS, Narwhal::Dispatcher::Inline.new(responder), Logger.new(log),
                                               FakeCounters.new, false)
    template = TEMPLATE.merge("fuzz.seen" => seen)
    sizes = sizes.dup
    if loop == :accept
      client, conn, action = accepted_by_loop(template, context, bytes.byteslice(0, sizes.first))
      offset = sizes.shift
    else
      server, client = UNIXSocket.pair
      request = Narwhal::Request.new(template, Narwhal::SocketWriter.new(server, 5), Narwhal::Listener::UNIX_REMOTE_ADDR)
      conn = Narwhal::Connection.new(server, request, context)
      action = :keep
      offset = 0
    end
    sizes.each do |n|
      break unless action == :keep

      client.write(bytes.byteslice(offset, n))
      offset += n
      action = conn.on_readable
      action = conn.on_writable while action == :write
    end
    read = +""
    read << client.read_nonblock(65_536) while client.wait_readable(0)&.then { !client.eof? }
    [read.gsub(/^date: .*\r\n/, "date: -\r\n"), seen, action]
  rescue EOFError
    [read.gsub(/^date: .*\r\n/, "date: -\r\n"), seen, action]
  ensure
    conn&.close
    client&.close
  end

  # A client connected to a Unix listener, with first waiting, accepted
  # and served by the loop: the client, its Connection (nil: closed) and
  # the action after the first bytes.
  def accepted_by_loop(template, context, first)
    @fuzz_dir ||= Dir.mktmpdir
    @fuzz_listener ||= Narwhal::Listener.new(File.join(@fuzz_dir, "fuzz.sock"))
    factory = Narwhal::Connection::Factory.new(@fuzz_listener, template, context, FakeCounters.new, budget: nil,
                                               early_hints: false, threaded: false, counting: false)
    client = UNIXSocket.new(@fuzz_listener.io.path)
    client.write(first)
    IO.select([@fuzz_listener.io])
    got = factory.accept_served
    return [client, nil, :close] if got == false

    conn, _fd, action = got
    action = conn.on_writable while action == :write
    [client, conn, action]
  end

  def test_the_client_closing_closes_the_connection
    conn = connection
    @client.close
    assert_equal :close, conn.on_readable
  end

  def test_with_the_access_log_on_every_request_goes_through_ruby
    lines = []
    log = Object.new
    log.define_singleton_method(:record) { |env, status, *| lines << [env["PATH_INFO"], status] }
    conn = connection(access_log: log)
    assert_equal :keep, send_bytes(conn, GET)
    assert_match(/hi \/a\z/, responses)
    assert_equal 1, @responder.in_ruby
    assert_equal [["/a", 200]], lines
  end
end
