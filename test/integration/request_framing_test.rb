# frozen_string_literal: true

require "test_helper"

# How the server frames requests read from a real socket: what it rejects
# (always before the app is called, with its own plain-text error and a
# closed connection) and that the answer does not depend on how the bytes
# were split (all at once, one byte at a time, pipelined behind another
# request).
class RequestFramingTest < Minitest::Test
  # Counts the requests that reach it; /hits reports the count.
  APP = <<~'RU'
    hits = 0
    run lambda { |env|
      if env["PATH_INFO"] == "/hits"
        body = hits.to_s
      else
        hits += 1
        body = "#{env['REQUEST_METHOD']} #{env['PATH_INFO']} #{env['rack.input'].read}"
      end
      # an explicit length: Rack 2's Lint hides to_ary, which would make the body chunked
      [200, { "content-type" => "text/plain", "content-length" => body.bytesize.to_s }, [body]]
    }
  RU

  REASONS = { 400 => "Bad Request", 417 => "Expectation Failed", 505 => "HTTP Version Not Supported" }.freeze

  HOST = "Host: x\r\n"
  POST = "POST / HTTP/1.1\r\nHost: x\r\n"

  REJECTED = {
    space_before_colon: ["GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400],
    tab_before_colon: ["GET / HTTP/1.1\r\n#{HOST}X-A\t: 1\r\n\r\n", 400],
    obs_fold: ["GET / HTTP/1.1\r\n#{HOST}X-A: 1\r\n 2\r\n\r\n", 400],
    obs_fold_with_tab: ["GET / HTTP/1.1\r\n#{HOST}X-A: 1\r\n\t2\r\n\r\n", 400],
    content_length_with_transfer_encoding:
      ["#{POST}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400],
    transfer_encoding_with_content_length:
      ["#{POST}Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n", 400],
    differing_content_lengths: ["#{POST}Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400],
    content_length_list: ["#{POST}Content-Length: 3, 3\r\n\r\nabc", 400],
    content_length_plus_sign: ["#{POST}Content-Length: +3\r\n\r\nabc", 400],
    content_length_minus_sign: ["#{POST}Content-Length: -3\r\n\r\nabc", 400],
    content_length_inner_space: ["#{POST}Content-Length: 1 0\r\n\r\n0123456789", 400],
    content_length_hex: ["#{POST}Content-Length: 0x3\r\n\r\nabc", 400],
    content_length_empty: ["#{POST}Content-Length:\r\n\r\n", 400],
    content_length_overflow: ["#{POST}Content-Length: 184467440737095516160\r\n\r\nabc", 400],
    content_length_at_2_pow_62: ["#{POST}Content-Length: 4611686018427387904\r\n\r\nabc", 400],
    transfer_encoding_gzip: ["#{POST}Transfer-Encoding: gzip\r\n\r\nabc", 400],
    transfer_encoding_chunked_gzip: ["#{POST}Transfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n", 400],
    transfer_encoding_gzip_chunked: ["#{POST}Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 400],
    transfer_encoding_chunked_chunked: ["#{POST}Transfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", 400],
    transfer_encoding_chunked_in_two_fields:
      ["#{POST}Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400],
    transfer_encoding_in_http10: ["POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400],
    chunk_size_not_hex: ["#{POST}Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", 400],
    chunk_size_with_0x: ["#{POST}Transfer-Encoding: chunked\r\n\r\n0x3\r\nabc\r\n0\r\n\r\n", 400],
    chunk_size_empty: ["#{POST}Transfer-Encoding: chunked\r\n\r\n\r\nabc\r\n0\r\n\r\n", 400],
    chunk_size_overflow: ["#{POST}Transfer-Encoding: chunked\r\n\r\n10000000000000000\r\nabc\r\n0\r\n\r\n", 400],
    chunk_size_bare_lf: ["#{POST}Transfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n", 400],
    chunk_bad_extension: ["#{POST}Transfer-Encoding: chunked\r\n\r\n3;=x\r\nabc\r\n0\r\n\r\n", 400],
    chunk_data_without_crlf: ["#{POST}Transfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n0\r\n\r\n", 400],
    chunk_data_with_bare_lf: ["#{POST}Transfer-Encoding: chunked\r\n\r\n3\r\nabc\n0\r\n\r\n", 400],
    trailer_with_bare_lf: ["#{POST}Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-T: 1\n\r\n", 400],
    nul_in_request_line: ["GET /a\0b HTTP/1.1\r\n#{HOST}\r\n", 400],
    bare_cr_in_request_line: ["GET /a\rb HTTP/1.1\r\n#{HOST}\r\n", 400],
    control_byte_in_request_line: ["GET /a\x01b HTTP/1.1\r\n#{HOST}\r\n", 400],
    del_in_request_line: ["GET /a\x7Fb HTTP/1.1\r\n#{HOST}\r\n", 400],
    tab_in_request_target: ["GET /a\tb HTTP/1.1\r\n#{HOST}\r\n", 400],
    nul_in_field_value: ["GET / HTTP/1.1\r\n#{HOST}X-A: a\0b\r\n\r\n", 400],
    bare_cr_in_field_value: ["GET / HTTP/1.1\r\n#{HOST}X-A: a\rb\r\n\r\n", 400],
    control_byte_in_field_value: ["GET / HTTP/1.1\r\n#{HOST}X-A: a\x1Fb\r\n\r\n", 400],
    del_in_field_value: ["GET / HTTP/1.1\r\n#{HOST}X-A: a\x7Fb\r\n\r\n", 400],
    nul_in_field_name: ["GET / HTTP/1.1\r\n#{HOST}X\0A: 1\r\n\r\n", 400],
    method_not_a_token: ["G(T / HTTP/1.1\r\n#{HOST}\r\n", 400],
    method_with_at_sign: ["G@T / HTTP/1.1\r\n#{HOST}\r\n", 400],
    empty_method: [" / HTTP/1.1\r\n#{HOST}\r\n", 400],
    relative_target: ["GET foo HTTP/1.1\r\n#{HOST}\r\n", 400],
    asterisk_target_with_get: ["GET * HTTP/1.1\r\n#{HOST}\r\n", 400],
    double_space_before_target: ["GET  / HTTP/1.1\r\n#{HOST}\r\n", 400],
    trailing_space_after_version: ["GET / HTTP/1.1 \r\n#{HOST}\r\n", 400],
    userinfo_in_absolute_target: ["GET http://u@x/ HTTP/1.1\r\n#{HOST}\r\n", 400],
    other_scheme_in_absolute_target: ["GET ftp://x/ HTTP/1.1\r\n#{HOST}\r\n", 400],
    garbage_minor_version: ["GET / HTTP/1.x\r\n#{HOST}\r\n", 400],
    version_without_minor: ["GET / HTTP/1\r\n#{HOST}\r\n", 400],
    lowercase_version: ["GET / http/1.1\r\n#{HOST}\r\n", 400],
    two_digit_major_version: ["GET / HTTP/11.1\r\n#{HOST}\r\n", 400],
    http2_version: ["GET / HTTP/2.0\r\n#{HOST}\r\n", 505],
    http09_version: ["GET / HTTP/0.9\r\n#{HOST}\r\n", 505],
    h2_preface: ["PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505],
    http11_without_host: ["GET / HTTP/1.1\r\nX-A: 1\r\n\r\n", 400],
    two_host_fields: ["GET / HTTP/1.1\r\nHost: x\r\nhost: x\r\n\r\n", 400],
    invalid_host: ["GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400],
    two_content_type_fields: ["GET / HTTP/1.1\r\n#{HOST}Content-Type: a/b\r\nContent-Type: a/b\r\n\r\n", 400],
    bare_lf_everywhere: ["GET / HTTP/1.1\nHost: x\n\n", 400],
    bare_lf_after_request_line: ["GET / HTTP/1.1\n#{HOST}\r\n", 400],
    bare_lf_after_field: ["GET / HTTP/1.1\r\nHost: x\nX-A: 1\r\n\r\n", 400],
    bare_lf_ending_head: ["GET / HTTP/1.1\r\n#{HOST}\n", 400],
    expect_something_else: ["GET / HTTP/1.1\r\n#{HOST}Expect: something-else\r\n\r\n", 417],
    expect_continue_and_more: ["#{POST}Content-Length: 1\r\nExpect: 100-continue, x\r\n\r\na", 417]
  }.freeze

  FIRST = "GET /first HTTP/1.1\r\nHost: x\r\n\r\n"

  VALID = {
    get: ["GET /g?q=1 HTTP/1.1\r\nHost: x\r\n\r\n", "GET /g "],
    absolute_form_get: ["GET http://example.com/abs?q=1 HTTP/1.1\r\nHost: x\r\n\r\n", "GET /abs "],
    post_with_content_length: ["POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", "POST /p hello"],
    chunked_post: ["POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" \
                   "5\r\nhello\r\n6;x=y\r\n world\r\n0\r\nX-T: 1\r\n\r\n", "POST /c hello world"]
  }.freeze

  def self.server
    @server ||= Narwhal::ServerProcess.start(app: APP).stop_after_run
  end

  def server
    self.class.server
  end

  def hits
    c = server.connect
    c.write("GET /hits HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    Integer(c.read_response.body)
  ensure
    c&.close
  end

  def assert_ok(response, body)
    assert_equal "HTTP/1.1 200 OK", response.status_line
    assert_equal "text/plain", response["content-type"]
    assert_equal body.bytesize.to_s, response["content-length"]
    assert_nil response["connection"]
    assert_equal body, response.body
  end

  # The server's own error, never the app's answer, and the connection closed.
  def assert_rejected(response, client, status)
    message = "#{REASONS.fetch(status)}\n"
    assert_equal "HTTP/1.1 #{status} #{REASONS.fetch(status)}", response.status_line
    assert_equal "text/plain", response["content-type"]
    assert_equal message.bytesize.to_s, response["content-length"]
    assert_equal "close", response["connection"]
    assert_equal message, response.body
    assert client.closed?, "connection should be closed after #{status}"
  end

  REJECTED.each do |name, (request, status)|
    define_method(:"test_rejects_#{name}") do
      before = hits
      c = server.connect
      c.write(request)
      assert_rejected(c.read_response, c, status)
      assert_equal before, hits, "the app must not be called"
    ensure
      c&.close
    end

    define_method(:"test_rejects_#{name}_byte_at_a_time") do
      before = hits
      c = server.connect
      c.trickle(request)
      assert_rejected(c.read_response, c, status)
      assert_equal before, hits, "the app must not be called"
    ensure
      c&.close
    end

    define_method(:"test_rejects_#{name}_pipelined_after_a_valid_request") do
      before = hits
      c = server.connect
      c.write(FIRST + request)
      assert_ok(c.read_response, "GET /first ")
      assert_rejected(c.read_response, c, status)
      assert_equal before + 1, hits, "only the first request reaches the app"
    ensure
      c&.close
    end
  end

  VALID.each do |name, (request, body)|
    define_method(:"test_serves_#{name}_byte_at_a_time_and_keeps_the_connection") do
      c = server.connect
      c.trickle(request)
      assert_ok(c.read_response, body)
      c.write(FIRST)
      assert_ok(c.read_response, "GET /first ")
    ensure
      c&.close
    end
  end

  def test_serves_pipelined_valid_requests_in_order
    c = server.connect
    c.write(VALID.values.map(&:first).join)
    VALID.each_value { |(_, body)| assert_ok(c.read_response, body) }
    c.write(FIRST)
    assert_ok(c.read_response, "GET /first ")
  ensure
    c&.close
  end

  def test_serves_pipelined_valid_requests_sent_byte_at_a_time
    c = server.connect
    c.trickle(VALID.values.map(&:first).join)
    VALID.each_value { |(_, body)| assert_ok(c.read_response, body) }
    c.write(FIRST)
    assert_ok(c.read_response, "GET /first ")
  ensure
    c&.close
  end

  def test_accepts_identical_repeated_content_length
    c = server.connect
    c.write("#{POST}Content-Length: 3\r\nContent-Length: 3\r\n\r\nabc")
    assert_ok(c.read_response, "POST / abc")
  ensure
    c&.close
  end

  def test_accepts_transfer_coding_in_any_case_and_http10_without_host
    c = server.connect
    c.write("#{POST}Transfer-Encoding: Chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n")
    assert_ok(c.read_response, "POST / ok")
    c.write("GET /ten HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
    r = c.read_response
    assert_equal "GET /ten ", r.body
    assert_equal "keep-alive", r["connection"]
  ensure
    c&.close
  end

  def test_ignores_empty_lines_before_the_request_line
    c = server.connect
    c.write("\r\n\r\nGET /after-blank HTTP/1.1\r\nHost: x\r\n\r\n")
    assert_ok(c.read_response, "GET /after-blank ")
  ensure
    c&.close
  end
end
