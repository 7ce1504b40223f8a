# frozen_string_literal: true

require "test_helper"
require "support/shared_server"
require "digest"
require "json"

# Request bodies as the app sees them through rack.input, sent over a real
# socket with Content-Length or chunked framing.
class RequestBodyTest < Minitest::Test
  APP = <<~'RU'
    require "digest"
    require "json"
    require "rack/request"

    # Rack 3's Lint hides #rewind (no longer in the SPEC); the server's
    # input behind it still has it.
    rewind = ->(input) { (input.respond_to?(:rewind) ? input : input.instance_variable_get(:@input)).rewind }
    # an explicit length: Rack 2's Lint hides to_ary, which would make the body chunked
    ok = lambda { |body, type = "text/plain"|
      [200, { "content-type" => type, "content-length" => body.bytesize.to_s }, [body]]
    }

    run lambda { |env|
      input = env["rack.input"]
      case env["PATH_INFO"]
      when "/echo" then ok.call(input.read, "application/octet-stream")
      when "/by-length"
        # as Rails 6.1's raw_post does: exactly CONTENT_LENGTH bytes
        data = input.read(Integer(env["CONTENT_LENGTH"]))
        ok.call(JSON.generate([env["CONTENT_LENGTH"], env["HTTP_TRANSFER_ENCODING"], data.bytesize,
                               Digest::SHA256.hexdigest(data), input.read]))
      when "/rack-request"
        req = Rack::Request.new(env)
        ok.call(req.body.read(req.content_length.to_i), "application/json")
      when "/ignore" then ok.call("ignored")
      when "/digest"
        data = input.read
        rewind.call(input)
        again = input.read
        ok.call("#{data.bytesize} #{Digest::SHA256.hexdigest(data)} rewound=#{again == data}")
      when "/env"
        seen = input.read
        ok.call(JSON.generate(env["QUERY_STRING"].split(",").to_h { |k| [k, env[k]] }.merge("body" => seen)))
      when "/spec"
        r = [input.read(3)]
        buf = +"junk"
        got = input.read(4, buf)
        r << got.dup << got.equal?(buf)
        r << input.gets << input.read(2) << input.gets << input.read << input.read(1) << input.read << input.gets
        buf = +"junk"
        r << input.read(5, buf) << buf.dup
        rewind.call(input)
        lines = []
        input.each { |line| lines << line }
        r << lines
        rewind.call(input)
        r << input.read(0) << input.gets
        buf = +"junk"
        got = input.read(nil, buf)
        r << got.dup << got.equal?(buf)
        rewind.call(input)
        r << input.read(3)&.encoding&.to_s << input.gets&.encoding&.to_s << input.read.encoding.to_s
        ok.call(JSON.generate(r), "application/json")
      end
    }
  RU

  BIG = 1024 * 1024

  include SharedServer
  serve(app: APP)

  def post(path, body, headers = "")
    "POST #{path} HTTP/1.1\r\nHost: x\r\n#{headers}Content-Length: #{body.bytesize}\r\n\r\n#{body}"
  end

  def chunked(path, chunks, headers: "", trailers: "")
    body = chunks.map { |c| "#{c.bytesize.to_s(16)}\r\n#{c}\r\n" }.join
    "POST #{path} HTTP/1.1\r\nHost: x\r\n#{headers}Transfer-Encoding: chunked\r\n\r\n#{body}0\r\n#{trailers}\r\n"
  end

  def assert_body(expected, response)
    assert_equal "HTTP/1.1 200 OK", response.status_line
    assert_equal expected.bytesize.to_s, response["content-length"]
    assert_equal expected.b, response.body.b
  end

  def assert_open
    @c.write("GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
    assert_body "", @c.read_response
  end

  def every_byte
    (0..255).map(&:chr).join * 3
  end

  def test_content_length_body_is_echoed_exactly
    @c.write(post("/echo", every_byte))
    assert_body every_byte, @c.read_response
    assert_open
  end

  def test_chunked_body_is_echoed_exactly
    @c.write(chunked("/echo", [every_byte[0, 100], every_byte[100..], "\r\n0\r\n\r\n"]))
    assert_body "#{every_byte}\r\n0\r\n\r\n", @c.read_response
    assert_open
  end

  # [CONTENT_LENGTH, HTTP_TRANSFER_ENCODING, bytes read by CONTENT_LENGTH, their digest, what is left]
  def by_length(data)
    [data.bytesize.to_s, nil, data.bytesize, Digest::SHA256.hexdigest(data), ""]
  end

  def json_of(response)
    assert_equal "HTTP/1.1 200 OK", response.status_line
    JSON.parse(response.body)
  end

  def test_chunked_body_is_announced_by_its_decoded_length
    json = '{"user":{"name":"narwhal","tags":["a","b"]}}'
    @c.write(chunked("/by-length", [json[0, 10], json[10..]]))
    assert_equal by_length(json), json_of(@c.read_response)
    @c.write(chunked("/rack-request", [json[0, 7], json[7, 20], json[27..]]))
    assert_body json, @c.read_response
    assert_open
  end

  def test_chunked_body_in_a_temporary_file_is_announced_by_its_decoded_length
    data = Random.new(4).bytes(BIG + 3)
    @c.write(chunked("/by-length", data.scan(/.{1,50000}/mn)))
    assert_equal by_length(data), json_of(@c.read_response)
    assert_open
  end

  def test_empty_chunked_body_has_content_length_zero
    @c.write(chunked("/by-length", []))
    assert_equal by_length(""), json_of(@c.read_response)
    @c.write(chunked("/rack-request", []))
    assert_body "", @c.read_response
    assert_open
  end

  def test_chunk_extensions_are_ignored
    @c.write("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" \
             "3;name=value\r\nabc\r\n4 ; q=\"a;b\\\"c\" ; flag\r\ndefg\r\n0;last=1\r\n\r\n")
    assert_body "abcdefg", @c.read_response
    assert_open
  end

  def test_trailers_reach_the_env_per_the_parser_rules
    keys = %w[HTTP_X_CHECKSUM HTTP_X_SEEN HTTP_HOST CONTENT_TYPE HTTP_AUTHORIZATION HTTP_X_UNDER]
    trailers = "X-Checksum: abc\r\nX-Seen: from-trailer\r\nHost: evil\r\nContent-Type: text/evil\r\n" \
               "Authorization: Basic eA==\r\nX_Under: u\r\n"
    @c.write(chunked("/env?#{keys.join(',')}", %w[da ta], headers: "X-Seen: from-head\r\n", trailers: trailers))
    r = @c.read_response
    assert_equal "HTTP/1.1 200 OK", r.status_line
    expected = { "HTTP_X_CHECKSUM" => "abc", "HTTP_X_SEEN" => "from-head", "HTTP_HOST" => "x",
                 "CONTENT_TYPE" => nil, "HTTP_AUTHORIZATION" => nil, "HTTP_X_UNDER" => nil, "body" => "data" }
    assert_equal expected, JSON.parse(r.body)
    assert_open
  end

  def test_expect_100_continue_before_the_body_is_sent
    @c.write("POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
    r = @c.read_response
    assert_equal "HTTP/1.1 100 Continue", r.status_line
    assert_empty r.headers
    @c.write("hello")
    assert_body "hello", @c.read_response
    assert_open
  end

  def test_expect_100_continue_with_a_chunked_body
    @c.write("POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n")
    assert_equal "HTTP/1.1 100 Continue", @c.read_response.status_line
    @c.write("5\r\nhello\r\n0\r\n\r\n")
    assert_body "hello", @c.read_response
  end

  def test_no_100_continue_when_the_body_came_with_the_head_or_for_http10
    @c.write(post("/echo", "hello", "Expect: 100-continue\r\n"))
    assert_body "hello", @c.read_response
    @c.write("POST /echo HTTP/1.0\r\nConnection: keep-alive\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
    refute @c.sock.wait_readable(0.1), "no 100 Continue for an HTTP/1.0 client"
    @c.write("hi")
    r = @c.read_response
    assert_equal "HTTP/1.1 200 OK", r.status_line
    assert_equal "hi", r.body
  end

  def test_pipelined_requests_after_bodies
    @c.write(post("/echo", "first") + chunked("/echo", %w[sec ond]) + post("/echo", "") +
             "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n" + post("/echo", "last"))
    ["first", "second", "", "", "last"].each { |body| assert_body body, @c.read_response }
    assert_open
  end

  def test_body_split_across_writes_and_request_after_it
    @c.write("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhel")
    @c.write("lo world")
    @c.write("\r\nGET /echo?after HTTP/1.1\r\nHost: x\r\n\r\n")
    assert_body "hello world", @c.read_response
    assert_body "", @c.read_response
  end

  def test_large_content_length_body_goes_through_a_rewindable_input
    data = Random.new(1).bytes(BIG)
    @c.write(post("/digest", data))
    assert_body "#{BIG} #{Digest::SHA256.hexdigest(data)} rewound=true", @c.read_response
    @c.write(post("/echo", data))
    assert_body data, @c.read_response
    assert_open
  end

  def test_large_chunked_body_goes_through_a_rewindable_input
    data = Random.new(2).bytes(BIG + 7)
    @c.write(chunked("/digest", data.scan(/.{1,65536}/mn)))
    assert_body "#{BIG + 7} #{Digest::SHA256.hexdigest(data)} rewound=true", @c.read_response
    @c.write(chunked("/echo", data.scan(/.{1,1000}/mn)))
    assert_body data, @c.read_response
    assert_open
  end

  def test_small_body_input_is_rewindable
    @c.write(post("/digest", "small"))
    assert_body "5 #{Digest::SHA256.hexdigest('small')} rewound=true", @c.read_response
  end

  def spec_results(tail)
    # read(3), read(4, buf), same buf?, gets, read(2), gets, read, read(1), read, gets,
    # read(5, buf), buf, (rewind) each, (rewind) read(0), gets, read(nil, buf), same buf?,
    # (rewind) encodings of read(3), gets, read
    ["lin", "e1\nl", true, "ine2\n", "xx", "#{tail}\n", "end", nil, "", nil, nil, "",
     ["line1\n", "line2\n", "xx#{tail}\n", "end"], "", "line1\n", "line2\nxx#{tail}\nend", true,
     "ASCII-8BIT", "ASCII-8BIT", "ASCII-8BIT"]
  end

  # Long strings as size and digest, so that a failure prints something readable.
  def summarize(value)
    case value
    when Array then value.map { |v| summarize(v) }
    when String then value.bytesize > 64 ? "#{value.bytesize}:#{Digest::SHA256.hexdigest(value)[0, 12]}" : value
    else value
    end
  end

  def test_rack_input_methods_follow_the_spec_in_memory
    tail = "x" * 10
    @c.write(post("/spec", "line1\nline2\nxx#{tail}\nend"))
    r = @c.read_response
    assert_equal "HTTP/1.1 200 OK", r.status_line
    assert_equal summarize(spec_results(tail)), summarize(JSON.parse(r.body))
  end

  def test_rack_input_methods_follow_the_spec_in_a_temporary_file
    tail = "x" * 200_000
    @c.write(chunked("/spec", ["line1\nline2\nxx#{tail}", "\nend"]))
    r = @c.read_response
    assert_equal "HTTP/1.1 200 OK", r.status_line
    assert_equal summarize(spec_results(tail)), summarize(JSON.parse(r.body))
  end

  def test_rack_input_without_a_body
    @c.write("GET /env?CONTENT_LENGTH HTTP/1.1\r\nHost: x\r\n\r\n")
    assert_equal({ "CONTENT_LENGTH" => nil, "body" => "" }, JSON.parse(@c.read_response.body))
    @c.write("GET /spec HTTP/1.1\r\nHost: x\r\n\r\n")
    assert_equal [nil, nil, false, nil, nil, nil, "", nil, "", nil, nil, "", [], "", nil, "", true,
                  nil, nil, "ASCII-8BIT"], JSON.parse(@c.read_response.body)
  end

  def test_unread_bodies_do_not_disturb_the_next_request
    @c.write(post("/ignore", "hello"))
    assert_body "ignored", @c.read_response
    @c.write(chunked("/ignore", %w[a b c]) + post("/echo", "next"))
    assert_body "ignored", @c.read_response
    assert_body "next", @c.read_response
    @c.write(post("/ignore", "z" * 300_000))
    assert_body "ignored", @c.read_response
    assert_open
  end

  # Where O_TMPFILE is missing (macOS, some file systems) bodies go to a
  # named file that is unlinked at once; it must behave the same.
  def test_large_body_without_o_tmpfile
    Dir.mktmpdir("narwhal-body") do |tmp|
      server = Narwhal::ServerProcess.start(app: "File::Constants.send(:remove_const, :TMPFILE)\n#{APP}",
                                            env: { "TMPDIR" => tmp })
      c = server.connect
      data = Random.new(3).bytes(300_000)
      c.write(post("/digest", data) + post("/spec", "line1\nline2\nxx#{'y' * 200_000}\nend"))
      assert_body "300000 #{Digest::SHA256.hexdigest(data)} rewound=true", c.read_response
      assert_equal summarize(spec_results("y" * 200_000)), summarize(JSON.parse(c.read_response.body))
      assert_empty Dir.children(tmp)
    ensure
      c&.close
      server&.stop
    end
  end
end
