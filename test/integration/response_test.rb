# frozen_string_literal: true

require "test_helper"
require "time"
require "rack"

# The response side as a client sees it: status line, headers, framing of
# every kind of body, HEAD and bodiless statuses, hijacking, and the calls
# the server owes the app afterwards (body.close, rack.response_finished,
# rack.after_reply).
class ResponseTest < Minitest::Test
  RACK3 = Gem::Version.new(Rack.release) >= Gem::Version.new("3")
  FILE_SIZE = 300_000
  CHUNK = 64 * 1024
  CHUNKED_BODY = "3\r\none\r\n3\r\ntwo\r\n5\r\nthree\r\n0\r\n\r\n"

  # Served through Rack::Lint (Rack 3 or Rack 2, whichever is loaded).
  APP = <<~'RU'
    require "rack"
    require "rack/files"
    RACK3 = Gem::Version.new(Rack.release) >= Gem::Version.new("3")
    File.binwrite("data.bin", Random.new(42).bytes(300_000))
    FILES = Rack::Files.new(Dir.pwd)

    # what happened inside the server, for the test to read back
    module Events
      def self.record(line)
        File.open("events.log", "a") { |f| f.puts(line) }
      end
    end

    class RecordingBody
      def initialize(id, parts)
        @id = id
        @parts = parts
      end

      def each(&block)
        @parts.each(&block)
      end

      def close
        Events.record("closed #{@id}")
      end
    end

    class FileBody
      def initialize(path)
        @path = path
      end

      def to_path
        @path
      end

      def each
        File.open(@path, "rb") { |f| while (s = f.read(16_384)) do yield s end }
      end

      def close
        Events.record("closed file")
      end
    end

    TEXT = { "content-type" => "text/plain" }.freeze
    CHUNK = "x" * 65_536

    run lambda { |env|
      id = env["QUERY_STRING"]
      case env["PATH_INFO"]
      when "/ok" then [200, { "content-type" => "text/plain", "x-custom" => "yes" }, ["hello"]]
      when "/status"
        code = Integer(id)
        bodiless = code < 200 || code == 204 || code == 304
        [code, bodiless ? {} : TEXT.dup, bodiless ? ["must not be sent"] : ["status #{code}"]]
      when "/multi"
        cookies = RACK3 ? ["a=1", "b=2"] : "a=1\nb=2"
        [200, TEXT.merge("set-cookie" => cookies), ["m"]]
      when "/length" then [200, TEXT.merge("content-length" => "5"), ["he", "llo"]]
      when "/array" then [200, TEXT.dup, ["ab", "cd"]]
      when "/big-array" then [200, TEXT.dup, ["a" * 40_000, "b" * 40_000]]
      when "/each" then [200, TEXT.dup, %w[one two three].each_entry]
      when "/stream"
        [200, TEXT.dup, lambda { |stream|
          stream.write("one")
          stream.write("two")
          stream << "three"
          stream.close
        }]
      when "/file" then FILES.call(env.merge("PATH_INFO" => "/data.bin"))
      when "/to-path" then [200, { "content-type" => "application/octet-stream" }, FileBody.new(File.expand_path("data.bin"))]
      when "/close" then [200, TEXT.dup, RecordingBody.new(id, ["closing"])]
      when "/endless"
        env["rack.response_finished"] << ->(_e, _s, _h, err) { Events.record("finished #{id} #{err.class}") }
        [200, TEXT.dup, RecordingBody.new(id, Enumerator.new { |y| 4096.times { y << CHUNK } })]
      when "/utf8" then [200, { "x-name" => "café" }, ["café"]]
      when "/binary" then [200, { "x-name" => "café" }, ["\xFF\xFE".b]]
      when "/app-chunked" then [200, TEXT.merge("transfer-encoding" => "chunked"), ["5\r\nhello\r\n", "0\r\n\r\n"]]
      when "/app-closes" then [200, TEXT.merge("connection" => "close"), ["bye"]]
      when "/partial-hijack"
        [200, TEXT.merge("rack.hijack" => lambda { |io|
          io.write("raw bytes")
          io.close
        }), []]
      when "/full-hijack"
        io = env["rack.hijack"].call
        io.write("HTTP/1.1 200 OK\r\ncontent-length: 6\r\nconnection: close\r\n\r\nhijack")
        io.close
        [200, {}, []]
      when "/finished"
        env["rack.response_finished"] << ->(_e, s, h, err) { Events.record("finished-first #{id} #{s} #{h.class} #{err.inspect}") }
        env["rack.response_finished"] << ->(_e, s, _h, _err) { Events.record("finished-second #{id} #{s}") }
        [200, TEXT.dup, ["finished"]]
      when "/finished-error"
        env["rack.response_finished"] << ->(_e, s, h, err) { Events.record("finished #{id} #{s.inspect} #{h.inspect} #{err.class}: #{err.message}") }
        raise "failed #{id}"
      when "/after-reply"
        env["rack.after_reply"] << -> { Events.record("after_reply #{id}") }
        [200, TEXT.dup, ["after"]]
      when "/early-hints-key" then [200, TEXT.dup, [env.key?("rack.early_hints").to_s]]
      else [404, TEXT.dup, ["not found"]]
      end
    }
  RU

  # Responses Rack::Lint would reject before the server saw them.
  UNLINTED_APP = <<~'RU'
    File.binwrite("data.bin", "0123456789" * 1000)
    PathBody = Struct.new(:to_path) do
      def each
        yield File.binread(to_path)
      end
    end

    run lambda { |env|
      case env["PATH_INFO"]
      when "/array" then [200, {}, ["ab", "cd"]]
      when "/utf8" then [200, { "x-name" => "café" }, ["café"]]
      when "/binary" then [200, { "x-name" => "café" }, ["\xFF\xFE".b]]
      when "/to-path" then [200, {}, PathBody.new(File.expand_path("data.bin"))]
      when "/rack2-multi" then [200, { "Set-Cookie" => "a=1\nb=2", "Content-Type" => "text/plain" }, ["m"]]
      when "/204-with-length" then [204, { "content-length" => "0", "transfer-encoding" => "chunked" }, []]
      when "/short" then [200, { "content-length" => "10" }, ["abc"]]
      when "/long" then [200, { "content-length" => "3" }, ["abc", "def"]]
      when "/gzip" then [200, { "transfer-encoding" => "gzip" }, ["not really gzip"]]
      when "/gzip-chunked" then [200, { "transfer-encoding" => ["gzip", "chunked"] }, ["5\r\nhello\r\n0\r\n\r\n"]]
      when "/both" then [200, { "content-length" => "99", "transfer-encoding" => "chunked" }, ["5\r\nhello\r\n0\r\n\r\n"]]
      when "/both-te-first" then [200, { "Transfer-Encoding" => "chunked", "Content-Length" => "99" }, ["5\r\nhello\r\n0\r\n\r\n"]]
      when "/plain" then [200, { "content-length" => "2" }, ["ok"]]
      end
    }
  RU

  def self.server
    @server ||= start(app: APP)
  end

  def self.unlinted
    @unlinted ||= start(app: UNLINTED_APP, lint: false)
  end

  def self.start(**kw)
    Narwhal::ServerProcess.start(**kw).stop_after_run
  end

  def server = self.class.server

  # Rack::Lint 2 hides the #to_ary and #to_path of the body it wraps: under
  # Rack 2 a linted Array or file body is streamed like any #each body.
  def computed_framing(length)
    RACK3 ? "content-length: #{length}\r\n" : "transfer-encoding: chunked\r\n"
  end

  # The body after a head read with #read_head.
  def read_body(client, head)
    return client.read_bytes(Integer(head[/^content-length: (\d+)/, 1])) unless head.include?("chunked")

    body = +""
    while (size = Integer(client.read_line, 16)).positive?
      body << client.read_bytes(size)
      client.read_line
    end
    client.read_line
    body
  end

  def request(client, path, version: "1.1", method: "GET")
    host = version == "1.1" ? "Host: x\r\n" : ""
    client.write("#{method} #{path} HTTP/#{version}\r\n#{host}\r\n")
  end

  # The response head exactly as sent, with the (checked) date replaced by "D".
  def read_head(client)
    lines = []
    while (line = client.read_line) != ""
      lines << line
    end
    head = "#{lines.join("\r\n")}\r\n\r\n"
    date = head[/^date: (.*)\r\n/, 1]
    assert date, "no date header in #{head.inspect}"
    assert_imf_fixdate(date)
    head.sub("date: #{date}\r\n", "date: D\r\n")
  end

  def assert_imf_fixdate(date)
    assert_match(/\A(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d\d:\d\d:\d\d GMT\z/,
                 date)
    assert_in_delta Time.now.to_f, Time.httpdate(date).to_f, 5
  end

  def events
    path = File.join(server.dir, "events.log")
    File.exist?(path) ? File.read(path) : ""
  end

  def wait_for_event(line)
    wait_until(timeout: 5, message: "event #{line.inspect}") { events.lines.map(&:chomp).include?(line) }
  end

  def test_status_line_app_headers_date_and_computed_length_exactly
    c = server.connect
    request(c, "/ok")
    head = read_head(c)
    assert_equal "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nx-custom: yes\r\ndate: D\r\n" \
                 "#{computed_framing(5)}#{KEPT}\r\n", head
    assert_equal "hello", read_body(c, head)
    refute c.closed?(timeout: 0.1), "keep-alive connection must stay open"
  ensure
    c&.close
  end

  def test_reason_phrases
    c = server.connect
    { 404 => "HTTP/1.1 404 Not Found", 201 => "HTTP/1.1 201 Created", 503 => "HTTP/1.1 503 Service Unavailable",
      418 => "HTTP/1.1 418 " }.each do |code, line|
      request(c, "/status?#{code}")
      r = c.read_response
      # status-line = HTTP-version SP status-code SP [ reason-phrase ]: an
      # unknown code gets an empty reason phrase but keeps the space
      assert_equal line, r.status_line
      assert_equal "status #{code}", r.body
    end
  ensure
    c&.close
  end

  def test_multi_value_header_becomes_repeated_lines
    c = server.connect
    request(c, "/multi")
    head = read_head(c)
    assert_equal "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nset-cookie: a=1\r\nset-cookie: b=2\r\n" \
                 "date: D\r\n#{computed_framing(1)}#{KEPT}\r\n", head
    assert_equal "m", read_body(c, head)
  ensure
    c&.close
  end

  def test_rack2_newline_joined_value_becomes_repeated_lines
    c = self.class.unlinted.connect
    request(c, "/rack2-multi")
    assert_equal "HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Type: text/plain\r\n" \
                 "date: D\r\ncontent-length: 1\r\n#{KEPT}\r\n", read_head(c)
    assert_equal "m", c.read_bytes(1)
  ensure
    c&.close
  end

  # header values and bodies in any encoding go out as their bytes
  def test_non_ascii_header_values_and_bodies
    [server, self.class.unlinted].each do |srv|
      c = srv.connect
      request(c, "/utf8")
      head = read_head(c)
      assert_equal "HTTP/1.1 200 OK\r\nx-name: caf\xC3\xA9\r\ndate: D\r\n".b, head.b[/\A.*date: D\r\n/m]
      assert_equal "caf\xC3\xA9".b, read_body(c, head).b
      request(c, "/binary")
      head = read_head(c)
      assert_equal "x-name: caf\xC3\xA9".b, head.b[/^x-name: .*(?=\r\n)/]
      assert_equal "\xFF\xFE".b, read_body(c, head).b
    ensure
      c&.close
    end
  end

  def test_app_content_length_is_kept_and_not_repeated
    c = server.connect
    request(c, "/length")
    assert_equal "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 5\r\ndate: D\r\n#{KEPT}\r\n", read_head(c)
    assert_equal "hello", c.read_bytes(5)
    request(c, "/ok")
    assert_equal "hello", c.read_response.body
  ensure
    c&.close
  end

  def test_array_bodies_get_a_content_length
    c = server.connect
    request(c, "/array")
    head = read_head(c)
    assert_equal "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ndate: D\r\n#{computed_framing(4)}#{KEPT}\r\n", head
    assert_equal "abcd", read_body(c, head)
    request(c, "/big-array")
    r = c.read_response
    assert_equal "80000", r["content-length"] if RACK3
    assert_equal ("a" * 40_000) + ("b" * 40_000), r.body
  ensure
    c&.close
  end

  # the same without Rack::Lint in between, which Rack 2 apps see in production
  def test_array_and_file_bodies_get_a_content_length_without_lint
    c = self.class.unlinted.connect
    request(c, "/array")
    assert_equal "HTTP/1.1 200 OK\r\ndate: D\r\ncontent-length: 4\r\n#{KEPT}\r\n", read_head(c)
    assert_equal "abcd", c.read_bytes(4)
    request(c, "/to-path")
    assert_equal "HTTP/1.1 200 OK\r\ndate: D\r\ncontent-length: 10000\r\n#{KEPT}\r\n", read_head(c)
    assert_equal "0123456789" * 1000, c.read_bytes(10_000)
  ensure
    c&.close
  end

  def test_each_body_is_chunked_for_http11
    c = server.connect
    request(c, "/each")
    assert_equal "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ndate: D\r\ntransfer-encoding: chunked\r\n#{KEPT}\r\n",
                 read_head(c)
    assert_equal CHUNKED_BODY, c.read_bytes(CHUNKED_BODY.bytesize)
    request(c, "/ok")
    assert_equal "hello", c.read_response.body
  ensure
    c&.close
  end

  # the app framed the body itself (as Rack::Chunked did): sent as it is
  def test_app_transfer_encoding_is_passed_through
    c = server.connect
    request(c, "/app-chunked")
    assert_equal "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\ndate: D\r\n#{KEPT}\r\n",
                 read_head(c)
    assert_equal "5\r\nhello\r\n0\r\n\r\n", c.read_bytes(15)
    request(c, "/ok")
    assert_equal "hello", c.read_response.body
  ensure
    c&.close
  end

  # A coding other than chunked last leaves the body without a delimiter
  # (RFC 9112 6.3): only the end of the connection can end it.
  def test_a_transfer_encoding_not_ending_in_chunked_is_the_connections_last
    c = self.class.unlinted.connect
    c.write("GET /gzip HTTP/1.1\r\nHost: x\r\n\r\nGET /plain HTTP/1.1\r\nHost: x\r\n\r\n")
    assert_equal "HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\ndate: D\r\nconnection: close\r\n\r\n", read_head(c)
    assert_equal "not really gzip", c.read_bytes(15)
    assert c.closed?(timeout: 5), "the socket is closed after the body; nothing is glued to it"
  ensure
    c&.close
  end

  def test_a_transfer_encoding_ending_in_chunked_keeps_the_connection
    c = self.class.unlinted.connect
    c.write("GET /gzip-chunked HTTP/1.1\r\nHost: x\r\n\r\nGET /plain HTTP/1.1\r\nHost: x\r\n\r\n")
    assert_equal "HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\ntransfer-encoding: chunked\r\ndate: D\r\n#{KEPT}\r\n",
                 read_head(c)
    assert_equal "5\r\nhello\r\n0\r\n\r\n", c.read_bytes(15)
    assert_equal "ok", c.read_response.body
  ensure
    c&.close
  end

  # RFC 9112 6.2: a sender must not send content-length with
  # transfer-encoding; transfer-encoding frames the body, so it is kept.
  def test_content_length_is_dropped_when_the_app_also_sets_transfer_encoding
    c = self.class.unlinted.connect
    c.write("GET /both HTTP/1.1\r\nHost: x\r\n\r\nGET /both-te-first HTTP/1.1\r\nHost: x\r\n\r\n" \
            "GET /plain HTTP/1.1\r\nHost: x\r\n\r\n")
    assert_equal "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ndate: D\r\n#{KEPT}\r\n", read_head(c)
    assert_equal "5\r\nhello\r\n0\r\n\r\n", c.read_bytes(15)
    assert_equal "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\ndate: D\r\n#{KEPT}\r\n", read_head(c)
    assert_equal "5\r\nhello\r\n0\r\n\r\n", c.read_bytes(15)
    assert_equal "ok", c.read_response.body
  ensure
    c&.close
  end

  def test_each_body_is_close_delimited_for_http10
    c = server.connect
    request(c, "/each", version: "1.0")
    assert_equal "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ndate: D\r\nconnection: close\r\n\r\n", read_head(c)
    assert_equal "onetwothree", c.read_to_eof
  ensure
    c&.close
  end

  def test_head_sends_headers_only_and_keeps_the_connection
    c = server.connect
    request(c, "/array", method: "HEAD")
    length = RACK3 ? "content-length: 4\r\n" : ""
    assert_equal "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ndate: D\r\n#{length}#{KEPT}\r\n", read_head(c)
    request(c, "/each", method: "HEAD")
    assert_equal "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ndate: D\r\n#{KEPT}\r\n", read_head(c)
    request(c, "/file", method: "HEAD")
    assert_equal FILE_SIZE.to_s, c.read_response(head: true)["content-length"]
    # had any body byte been sent, this would not parse as the next response
    request(c, "/ok")
    r = c.read_response
    assert_equal "HTTP/1.1 200 OK", r.status_line
    assert_equal "hello", r.body
  ensure
    c&.close
  end

  def test_bodiless_statuses_send_no_body
    c = server.connect
    [204, 304, 102].each do |code|
      request(c, "/status?#{code}")
      head = read_head(c)
      assert_match(/\AHTTP\/1\.1 #{code} [A-Za-z ]+\r\ndate: D\r\n#{KEPT}\r\n\z/, head)
    end
    request(c, "/ok")
    assert_equal "hello", c.read_response.body, "a body byte of a bodiless response leaked"
  ensure
    c&.close
  end

  def test_no_length_or_transfer_encoding_on_204
    c = self.class.unlinted.connect
    request(c, "/204-with-length")
    assert_equal "HTTP/1.1 204 No Content\r\ndate: D\r\n#{KEPT}\r\n", read_head(c)
    refute c.closed?(timeout: 0.1)
  ensure
    c&.close
  end

  def test_body_shorter_than_content_length_closes_the_connection
    srv = self.class.unlinted
    c = srv.connect
    request(c, "/short")
    assert_equal "HTTP/1.1 200 OK\r\ncontent-length: 10\r\ndate: D\r\n#{KEPT}\r\n", read_head(c)
    assert_equal "abc", c.read_to_eof
    wait_until(timeout: 5, message: "short body logged") { srv.log.include?("shorter than content-length by 7 bytes") }
  ensure
    c&.close
  end

  def test_body_longer_than_content_length_is_cut_and_the_connection_closed
    srv = self.class.unlinted
    c = srv.connect
    request(c, "/long")
    assert_equal "HTTP/1.1 200 OK\r\ncontent-length: 3\r\ndate: D\r\n#{KEPT}\r\n", read_head(c)
    assert_equal "abc", c.read_to_eof
    wait_until(timeout: 5, message: "long body logged") { srv.log.include?("longer than content-length") }
  ensure
    c&.close
  end

  # Rack 2 defines no streaming bodies: the test exists only under Rack 3.
  if RACK3
    def test_streaming_body
      c = server.connect
      request(c, "/stream")
      assert_equal "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ndate: D\r\ntransfer-encoding: chunked\r\n#{KEPT}\r\n",
                   read_head(c)
      assert_equal CHUNKED_BODY, c.read_bytes(CHUNKED_BODY.bytesize)
      request(c, "/stream", version: "1.0")
      r = c.read_response
      assert_equal "close", r["connection"]
      assert_equal "onetwothree", r.body
    ensure
      c&.close
    end
  end

  def test_rack_files_body_is_sent_with_its_length
    data = File.binread(File.join(server.dir, "data.bin"))
    c = server.connect
    2.times do
      request(c, "/file")
      r = c.read_response
      assert_equal 200, r.status
      assert_equal FILE_SIZE.to_s, r["content-length"]
      assert_equal data.bytesize, r.body.bytesize
      assert data == r.body, "file bytes differ"
    end
  ensure
    c&.close
  end

  def test_to_path_body_is_sent_and_closed
    data = File.binread(File.join(server.dir, "data.bin"))
    c = server.connect
    request(c, "/to-path")
    r = c.read_response
    assert_equal FILE_SIZE.to_s, r["content-length"] if RACK3
    assert data == r.body, "file bytes differ"
    wait_for_event("closed file")
  ensure
    c&.close
  end

  def test_body_close_is_called
    c = server.connect
    request(c, "/close?normal")
    assert_equal "closing", c.read_response.body
    wait_for_event("closed normal")
  ensure
    c&.close
  end

  def test_body_close_is_called_when_the_client_goes_away_mid_response
    c = server.connect
    request(c, "/endless?gone")
    assert_equal 200, Integer(c.read_line[/\d{3}/])
    c.read_bytes(CHUNK)
    c.close
    wait_for_event("closed gone")
    # the callbacks learn that the response did not make it
    wait_for_event("finished gone Narwhal::ClientGone")
    c = server.connect
    request(c, "/ok")
    assert_equal "hello", c.read_response.body
  ensure
    c&.close
  end

  def test_app_connection_close_is_honoured
    c = server.connect
    request(c, "/app-closes")
    head = read_head(c)
    assert_equal "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ndate: D\r\n#{computed_framing(3)}" \
                 "connection: close\r\n\r\n", head
    assert_equal "bye", read_body(c, head)
    assert c.closed?, "the server must close after connection: close"
  ensure
    c&.close
  end

  def test_partial_hijack
    c = server.connect
    request(c, "/partial-hijack")
    assert_equal "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ndate: D\r\n\r\n", read_head(c)
    assert_equal "raw bytes", c.read_to_eof
  ensure
    c&.close
  end

  def test_full_hijack
    c = server.connect
    request(c, "/full-hijack")
    assert_equal "HTTP/1.1 200 OK\r\ncontent-length: 6\r\nconnection: close\r\n\r\nhijack", c.read_to_eof
    c = server.connect
    request(c, "/ok")
    assert_equal "hello", c.read_response.body, "server keeps serving after a hijack"
  ensure
    c&.close
  end

  def test_response_finished_callbacks_run_in_reverse_order
    c = server.connect
    request(c, "/finished?f1")
    assert_equal "finished", c.read_response.body
    wait_for_event("finished-first f1 200 Hash nil")
    lines = events.lines.map(&:chomp)
    assert_operator lines.index("finished-second f1 200"), :<, lines.index("finished-first f1 200 Hash nil"),
                    "rack.response_finished callables run in reverse order"
  ensure
    c&.close
  end

  def test_response_finished_gets_the_error_when_the_app_raises
    c = server.connect
    request(c, "/finished-error?f2")
    assert_equal "HTTP/1.1 500 Internal Server Error", c.read_response.status_line
    wait_for_event("finished f2 nil nil RuntimeError: failed f2")
  ensure
    c&.close
  end

  def test_after_reply_callbacks_run
    c = server.connect
    request(c, "/after-reply?a1")
    assert_equal "after", c.read_response.body
    wait_for_event("after_reply a1")
  ensure
    c&.close
  end

  def test_early_hints_are_off_by_default
    c = server.connect
    request(c, "/early-hints-key")
    assert_equal "false", c.read_response.body
  ensure
    c&.close
  end
end
