# frozen_string_literal: true

require "test_helper"

# Narwhal::HttpParser through its Ruby API: the env it builds, the bodies it
# decodes and every request it rejects (with the status the server sends).
# Each case runs three ways — bytes whole, split in two, one at a time —
# feeding the parser as the server does, and all three must agree.
class HttpParserTest < Minitest::Test
  LIMITS = [1024, 4096, 20, 1 << 20].freeze # request line, header section, fields, body

  Result = Struct.new(:requests, :status) # requests: [[env, body], ...]

  # Parses a stream of pipelined requests fed in pieces of the given sizes.
  def parse(bytes, pieces)
    parser = Narwhal::HttpParser.new
    parser.configure(*LIMITS)
    buf = String.new(encoding: Encoding::BINARY)
    off = 0
    env = {}
    body = String.new(encoding: Encoding::BINARY)
    state = :head
    remaining = 0
    requests = []
    finish = lambda do
      requests << [env, body]
      parser.reset
      env = {}
      body = String.new(encoding: Encoding::BINARY)
      state = :head
    end
    pieces.each do |piece|
      buf << piece
      loop do
        case state
        when :head
          off = parser.execute(env, buf, off)
          break unless parser.head_done?

          if parser.chunked? then state = :chunked
          elsif parser.content_length.to_i.positive?
            state = :length
            remaining = parser.content_length
          else finish.call
          end
        when :length
          n = [buf.bytesize - off, remaining].min
          body << buf.byteslice(off, n)
          off += n
          remaining -= n
          break unless remaining.zero?

          finish.call
        when :chunked
          off = parser.decode_chunked(env, buf, off, body)
          break unless parser.body_done?

          finish.call
        end
        break if off >= buf.bytesize && state == :head
      end
    end
    Result.new(requests, nil)
  rescue Narwhal::HttpParserError => e
    Result.new(requests, e.status)
  end

  # The same result whole, split and byte at a time; returns it.
  def parse_all_ways(bytes)
    bytes = bytes.b
    whole = parse(bytes, [bytes])
    half = bytes.bytesize / 2
    split = parse(bytes, [bytes.byteslice(0, half), bytes.byteslice(half..)])
    bytewise = parse(bytes, bytes.each_char.to_a)
    assert_equal comparable(whole), comparable(split), "split in two differs"
    assert_equal comparable(whole), comparable(bytewise), "byte at a time differs"
    whole
  end

  def comparable(result)
    [result.status, result.requests.map { |env, body| [env.sort_by(&:first), body] }]
  end

  def env_of(bytes)
    r = parse_all_ways(bytes)
    assert_nil r.status, "rejected with #{r.status}"
    assert_equal 1, r.requests.size
    r.requests.first.first
  end

  def assert_rejected(status, bytes)
    r = parse_all_ways(bytes)
    assert_equal status, r.status, "expected #{status} for #{bytes.inspect[0, 120]}"
    assert_empty r.requests
  end

  def req(head, fields = "Host: example.com\r\n", body = "")
    "#{head}\r\n#{fields}\r\n#{body}"
  end

  # --- the env ---

  def test_origin_form_env
    env = env_of(req("GET /a/b?x=1&y=2 HTTP/1.1"))
    assert_equal "GET", env["REQUEST_METHOD"]
    assert_equal "/a/b", env["PATH_INFO"]
    assert_equal "/a/b", env["REQUEST_PATH"]
    assert_equal "x=1&y=2", env["QUERY_STRING"]
    assert_equal "/a/b?x=1&y=2", env["REQUEST_URI"]
    assert_equal "HTTP/1.1", env["SERVER_PROTOCOL"]
    assert_equal "HTTP/1.1", env["HTTP_VERSION"]
    assert_equal "example.com", env["HTTP_HOST"]
    assert_equal "example.com", env["SERVER_NAME"]
    assert_equal "80", env["SERVER_PORT"]
  end

  def test_no_query_gives_empty_query_string
    env = env_of(req("GET /p HTTP/1.1"))
    assert_equal "", env["QUERY_STRING"]
    assert_equal "/p", env["REQUEST_URI"]
  end

  def test_empty_query_after_question_mark
    env = env_of(req("GET /p? HTTP/1.1"))
    assert_equal "", env["QUERY_STRING"]
    assert_equal "/p?", env["REQUEST_URI"]
  end

  def test_fragment_is_not_part_of_path_or_query
    env = env_of(req("GET /p?q=1#frag HTTP/1.1"))
    assert_equal "/p", env["PATH_INFO"]
    assert_equal "q=1", env["QUERY_STRING"]
  end

  def test_host_with_port
    env = env_of(req("GET / HTTP/1.1", "Host: example.com:8080\r\n"))
    assert_equal "example.com", env["SERVER_NAME"]
    assert_equal "8080", env["SERVER_PORT"]
    assert_equal "example.com:8080", env["HTTP_HOST"]
  end

  def test_ipv6_host_literal
    env = env_of(req("GET / HTTP/1.1", "Host: [::1]:9292\r\n"))
    assert_equal "[::1]", env["SERVER_NAME"]
    assert_equal "9292", env["SERVER_PORT"]
  end

  def test_ipv6_host_literal_without_port
    env = env_of(req("GET / HTTP/1.1", "Host: [2001:db8::1]\r\n"))
    assert_equal "[2001:db8::1]", env["SERVER_NAME"]
    assert_equal "80", env["SERVER_PORT"]
  end

  def test_absolute_form_sets_host_path_and_scheme
    env = env_of(req("GET http://other.example:81/p/q?z=9 HTTP/1.1", "Host: ignored\r\n"))
    assert_equal "other.example", env["SERVER_NAME"]
    assert_equal "81", env["SERVER_PORT"]
    assert_equal "other.example:81", env["HTTP_HOST"]
    assert_equal "/p/q", env["PATH_INFO"]
    assert_equal "z=9", env["QUERY_STRING"]
    assert_equal "http://other.example:81/p/q?z=9", env["REQUEST_URI"]
  end

  def test_absolute_form_https_default_port
    env = env_of(req("GET https://secure.example/x HTTP/1.1", "Host: secure.example\r\n"))
    assert_equal "https", env["rack.url_scheme"]
    assert_equal "443", env["SERVER_PORT"]
  end

  def test_absolute_form_without_path_is_slash
    env = env_of(req("GET http://h.example HTTP/1.1", "Host: h.example\r\n"))
    assert_equal "/", env["PATH_INFO"]
  end

  def test_options_asterisk
    env = env_of(req("OPTIONS * HTTP/1.1"))
    assert_equal "*", env["PATH_INFO"]
    assert_equal "*", env["REQUEST_URI"]
  end

  def test_connect_authority_form
    env = env_of(req("CONNECT example.com:443 HTTP/1.1", "Host: example.com:443\r\n"))
    assert_equal "CONNECT", env["REQUEST_METHOD"]
    assert_equal "example.com:443", env["REQUEST_URI"]
  end

  def test_http10_without_host_is_fine
    env = env_of("GET /old HTTP/1.0\r\n\r\n")
    assert_equal "HTTP/1.0", env["SERVER_PROTOCOL"]
    refute env.key?("HTTP_HOST")
  end

  def test_content_type_and_length_have_no_http_prefix
    env = env_of(req("POST / HTTP/1.1", "Host: x\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n", "hi"))
    assert_equal "text/plain", env["CONTENT_TYPE"]
    assert_equal "2", env["CONTENT_LENGTH"]
    refute env.key?("HTTP_CONTENT_TYPE")
    refute env.key?("HTTP_CONTENT_LENGTH")
  end

  def test_field_names_become_http_keys
    env = env_of(req("GET / HTTP/1.1", "Host: x\r\nX-Request-Id: abc\r\nuser-agent: t/1\r\n"))
    assert_equal "abc", env["HTTP_X_REQUEST_ID"]
    assert_equal "t/1", env["HTTP_USER_AGENT"]
  end

  def test_field_value_whitespace_is_trimmed
    env = env_of(req("GET / HTTP/1.1", "Host: x\r\nX-A: \t value with  inner \t \r\n"))
    assert_equal "value with  inner", env["HTTP_X_A"]
  end

  def test_empty_field_value
    env = env_of(req("GET / HTTP/1.1", "Host: x\r\nX-Empty:\r\n"))
    assert_equal "", env["HTTP_X_EMPTY"]
  end

  def test_repeated_fields_are_joined_with_comma
    env = env_of(req("GET / HTTP/1.1", "Host: x\r\nAccept: a\r\nAccept: b\r\naccept: c\r\n"))
    assert_equal "a, b, c", env["HTTP_ACCEPT"]
  end

  def test_repeated_cookies_are_joined_with_semicolon
    env = env_of(req("GET / HTTP/1.1", "Host: x\r\nCookie: a=1\r\nCookie: b=2\r\n"))
    assert_equal "a=1; b=2", env["HTTP_COOKIE"]
  end

  def test_underscore_field_does_not_override_dash_field
    env = env_of(req("GET / HTTP/1.1", "Host: x\r\nX-Forwarded-For: 1.1.1.1\r\nX_Forwarded_For: 6.6.6.6\r\n"))
    assert_equal "1.1.1.1", env["HTTP_X_FORWARDED_FOR"]
  end

  def test_bytes_above_0x7f_in_target_and_values_are_kept
    env = env_of(req("GET /caf\xC3\xA9 HTTP/1.1".b, "Host: x\r\nX-Snow: \xE2\x98\x83\r\n".b))
    assert_equal "/caf\xC3\xA9".b, env["PATH_INFO"].b
    assert_equal "\xE2\x98\x83".b, env["HTTP_X_SNOW"].b
  end

  def test_methods_are_tokens
    %w[GET HEAD POST PUT DELETE PATCH PROPFIND M-SEARCH X.Y].each do |m|
      assert_equal m, env_of(req("#{m} / HTTP/1.1"))["REQUEST_METHOD"]
    end
  end

  def test_http_12_is_served_as_11
    assert_equal "HTTP/1.1", env_of(req("GET / HTTP/1.2"))["SERVER_PROTOCOL"]
  end

  def test_empty_lines_before_the_request_line_are_ignored
    assert_equal "/x", env_of("\r\n\r\n#{req('GET /x HTTP/1.1')}")["PATH_INFO"]
  end

  def test_version_field_is_not_http_version
    env = env_of(req("GET / HTTP/1.1", "Host: x\r\nVersion: 9\r\n"))
    assert_equal "HTTP/1.1", env["HTTP_VERSION"]
  end

  # --- persistence ---

  def keepalive(bytes)
    parser = Narwhal::HttpParser.new
    parser.configure(*LIMITS)
    parser.execute({}, bytes, 0)
    parser.keepalive?
  end

  def test_keepalive_rules
    assert keepalive(req("GET / HTTP/1.1"))
    refute keepalive(req("GET / HTTP/1.1", "Host: x\r\nConnection: close\r\n"))
    refute keepalive(req("GET / HTTP/1.1", "Host: x\r\nConnection: Upgrade, CLOSE\r\n"))
    refute keepalive("GET / HTTP/1.0\r\n\r\n")
    assert keepalive("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
  end

  def test_expect_continue_flag
    parser = Narwhal::HttpParser.new
    parser.configure(*LIMITS)
    parser.execute({}, req("PUT / HTTP/1.1", "Host: x\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n"), 0)
    assert parser.expect_continue?
  end

  # --- bodies ---

  def test_content_length_body
    r = parse_all_ways(req("POST / HTTP/1.1", "Host: x\r\nContent-Length: 5\r\n", "hello"))
    assert_equal "hello", r.requests.first.last
  end

  def test_content_length_zero
    r = parse_all_ways(req("POST / HTTP/1.1", "Host: x\r\nContent-Length: 0\r\n"))
    assert_equal [""], r.requests.map(&:last)
  end

  def test_leading_zeros_in_content_length
    r = parse_all_ways(req("POST / HTTP/1.1", "Host: x\r\nContent-Length: 003\r\n", "abc"))
    assert_equal "abc", r.requests.first.last
  end

  def test_identical_repeated_content_length_is_accepted
    r = parse_all_ways(req("POST / HTTP/1.1", "Host: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n", "abc"))
    assert_equal "abc", r.requests.first.last
  end

  def test_chunked_body
    r = parse_all_ways(req("POST / HTTP/1.1", "Host: x\r\nTransfer-Encoding: chunked\r\n",
                           "5\r\nhello\r\n1;a=b;c=\"d e\"\r\n \r\nA\r\n0123456789\r\n0\r\n\r\n"))
    assert_nil r.status
    assert_equal "hello 0123456789", r.requests.first.last
  end

  def test_chunk_size_is_case_insensitive_hex_with_leading_zeros
    r = parse_all_ways(req("POST / HTTP/1.1", "Host: x\r\nTransfer-Encoding: chunked\r\n",
                           "000a\r\n0123456789\r\nB\r\nabcdefghijk\r\n0\r\n\r\n"))
    assert_equal "0123456789abcdefghijk", r.requests.first.last
  end

  def test_chunked_trailers_are_merged_when_absent
    r = parse_all_ways(req("POST / HTTP/1.1", "Host: x\r\nTransfer-Encoding: chunked\r\nX-Seen: head\r\n",
                           "1\r\na\r\n0\r\nX-Checksum: abc\r\nX-Seen: trailer\r\n\r\n"))
    env = r.requests.first.first
    assert_equal "abc", env["HTTP_X_CHECKSUM"]
    assert_equal "head", env["HTTP_X_SEEN"]
  end

  def test_forbidden_trailers_are_dropped
    r = parse_all_ways(req("POST / HTTP/1.1", "Host: x\r\nTransfer-Encoding: chunked\r\n",
                           "1\r\na\r\n0\r\nContent-Length: 99\r\nHost: evil\r\n\r\n"))
    env = r.requests.first.first
    assert_nil env["CONTENT_LENGTH"]
    assert_equal "x", env["HTTP_HOST"]
  end

  def test_transfer_encoding_is_case_insensitive
    r = parse_all_ways(req("POST / HTTP/1.1", "Host: x\r\nTransfer-Encoding: CHUNKED\r\n", "0\r\n\r\n"))
    assert_nil r.status
  end

  def test_pipelined_requests_with_bodies
    stream = req("POST /1 HTTP/1.1", "Host: x\r\nContent-Length: 3\r\n", "abc") +
             req("POST /2 HTTP/1.1", "Host: x\r\nTransfer-Encoding: chunked\r\n", "2\r\nde\r\n0\r\n\r\n") +
             req("GET /3 HTTP/1.1")
    r = parse_all_ways(stream)
    assert_nil r.status
    assert_equal(%w[/1 /2 /3], r.requests.map { |env, _| env["PATH_INFO"] })
    assert_equal(["abc", "de", ""], r.requests.map(&:last))
  end

  def test_error_after_valid_pipelined_request_keeps_the_first
    r = parse_all_ways(req("GET /ok HTTP/1.1") + "GET /bad HTTP/1.1\r\nHost : x\r\n\r\n")
    assert_equal 400, r.status
    assert_equal ["/ok"], r.requests.map { |env, _| env["PATH_INFO"] }
  end

  # --- rejections (400 unless stated) ---

  BAD_REQUESTS = {
    "space_before_colon" => "GET / HTTP/1.1\r\nHost : x\r\n\r\n",
    "tab_before_colon" => "GET / HTTP/1.1\r\nHost\t: x\r\n\r\n",
    "obs_fold" => "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n  b\r\n\r\n",
    "obs_fold_tab" => "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n\tb\r\n\r\n",
    "cl_and_te" => "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "te_and_cl" => "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
    "conflicting_cl" => "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
    "cl_list" => "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 3\r\n\r\nabc",
    "cl_plus" => "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +3\r\n\r\nabc",
    "cl_minus" => "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -3\r\n\r\nabc",
    "cl_inner_space" => "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1 0\r\n\r\n",
    "cl_hex" => "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0x10\r\n\r\n",
    "cl_empty" => "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: \r\n\r\n",
    "cl_overflow" => "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n",
    "cl_wraps_to_small" => "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 18446744073709551617\r\n\r\nx",
    "te_not_final_chunked" => "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
    "te_unknown" => "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: foo, chunked\r\n\r\n0\r\n\r\n",
    "te_identity" => "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n\r\n",
    "te_chunked_twice" => "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n",
    "te_http10" => "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "chunk_size_not_hex" => "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    "chunk_size_empty" => "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\r\n",
    "chunk_size_negative" => "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n",
    "chunk_size_0x" => "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n",
    "chunk_size_overflow" => "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n#{'f' * 20}\r\n",
    "chunk_size_bare_lf" => "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n",
    "chunk_data_bare_lf" => "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\n0\r\n\r\n",
    "chunk_data_no_crlf" => "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloX\r\n0\r\n\r\n",
    "chunk_size_bare_cr" => "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\rX\r\nhello\r\n",
    "chunk_ext_bad" => "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;\x01\r\nhello\r\n",
    "chunk_ext_unclosed_quote" => "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;a=\"b\r\nhello\r\n",
    "trailer_bare_lf" => "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: y\n\r\n",
    "nul_in_target" => "GET /a\x00b HTTP/1.1\r\nHost: x\r\n\r\n",
    "nul_in_value" => "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n",
    "nul_in_name" => "GET / HTTP/1.1\r\nHost: x\r\nX\x00A: a\r\n\r\n",
    "bare_cr_in_value" => "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n",
    "bare_cr_in_request_line" => "GET /a\rb HTTP/1.1\r\nHost: x\r\n\r\n",
    "ctl_in_value" => "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n",
    "del_in_value" => "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x7Fb\r\n\r\n",
    "escape_in_target" => "GET /\e[31m HTTP/1.1\r\nHost: x\r\n\r\n",
    "space_in_target" => "GET /a b HTTP/1.1\r\nHost: x\r\n\r\n",
    "tab_in_request_line" => "GET\t/ HTTP/1.1\r\nHost: x\r\n\r\n",
    "double_space" => "GET  / HTTP/1.1\r\nHost: x\r\n\r\n",
    "trailing_space" => "GET / HTTP/1.1 \r\nHost: x\r\n\r\n",
    "method_not_token" => "GE(T / HTTP/1.1\r\nHost: x\r\n\r\n",
    "method_empty" => " / HTTP/1.1\r\nHost: x\r\n\r\n",
    "missing_version" => "GET /\r\nHost: x\r\n\r\n",
    "version_lowercase" => "GET / http/1.1\r\nHost: x\r\n\r\n",
    "version_no_minor" => "GET / HTTP/1\r\nHost: x\r\n\r\n",
    "version_garbage" => "GET / HTTP/1.x\r\nHost: x\r\n\r\n",
    "target_relative" => "GET a/b HTTP/1.1\r\nHost: x\r\n\r\n",
    "target_empty_star_get" => "GET * HTTP/1.1\r\nHost: x\r\n\r\n",
    "authority_without_connect" => "GET example.com:80 HTTP/1.1\r\nHost: x\r\n\r\n",
    "absolute_with_userinfo" => "GET http://user:pw@h/ HTTP/1.1\r\nHost: h\r\n\r\n",
    "absolute_unknown_scheme" => "GET ftp://h/ HTTP/1.1\r\nHost: h\r\n\r\n",
    "missing_host" => "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n",
    "two_hosts" => "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    "host_with_space" => "GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
    "host_bad_port" => "GET / HTTP/1.1\r\nHost: a:8x\r\n\r\n",
    "field_without_colon" => "GET / HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n",
    "field_name_empty" => "GET / HTTP/1.1\r\nHost: x\r\n: v\r\n\r\n",
    "field_name_not_token" => "GET / HTTP/1.1\r\nHost: x\r\nX(A): v\r\n\r\n",
    "bare_lf_request_line" => "GET / HTTP/1.1\nHost: x\r\n\r\n",
    "bare_lf_field" => "GET / HTTP/1.1\r\nHost: x\n\r\n",
    "bare_lf_end_of_head" => "GET / HTTP/1.1\r\nHost: x\r\n\n",
    "leading_whitespace_first_field" => "GET / HTTP/1.1\r\n Host: x\r\n\r\n"
  }.freeze

  BAD_REQUESTS.each do |name, bytes|
    define_method("test_rejects_#{name}") { assert_rejected(400, bytes) }
  end

  def test_http2_version_is_505
    assert_rejected 505, "GET / HTTP/2.0\r\nHost: x\r\n\r\n"
  end

  def test_http09_style_version_is_505
    assert_rejected 505, "GET / HTTP/0.9\r\nHost: x\r\n\r\n"
  end

  def test_expect_other_than_continue_is_417
    assert_rejected 417, req("PUT / HTTP/1.1", "Host: x\r\nExpect: teapot\r\nContent-Length: 1\r\n", "a")
  end

  def test_http2_preface_is_rejected
    r = parse_all_ways("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    assert_includes [400, 505], r.status
  end

  # --- limits ---

  def test_request_line_at_the_limit_is_accepted
    path = "/#{'a' * (LIMITS[0] - "GET  HTTP/1.1\r\n".bytesize - 1)}"
    assert_equal path, env_of(req("GET #{path} HTTP/1.1"))["PATH_INFO"]
  end

  def test_request_line_over_the_limit_is_414
    assert_rejected 414, req("GET /#{'a' * LIMITS[0]} HTTP/1.1")
  end

  def test_request_line_over_the_limit_without_end_is_414
    assert_rejected 414, "GET /#{'a' * (LIMITS[0] + 10)}"
  end

  def test_long_request_line_with_bare_lf_is_414_however_it_arrives
    assert_rejected 414, "GET /#{'a' * (LIMITS[0] + 10)}\nHost: x\r\n\r\n"
  end

  def test_header_section_over_the_limit_is_431
    assert_rejected 431, req("GET / HTTP/1.1", "Host: x\r\nX-Big: #{'v' * LIMITS[1]}\r\n")
  end

  def test_header_section_over_the_limit_without_end_is_431
    assert_rejected 431, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: #{'v' * (LIMITS[1] + 10)}"
  end

  def test_too_many_fields_is_431
    fields = "Host: x\r\n" + (1..LIMITS[2]).map { |i| "X-#{i}: v\r\n" }.join
    assert_rejected 431, req("GET / HTTP/1.1", fields)
  end

  def test_fields_at_the_limit_are_accepted
    fields = "Host: x\r\n" + (2..LIMITS[2]).map { |i| "X-#{i}: v\r\n" }.join
    assert_equal "v", env_of(req("GET / HTTP/1.1", fields))["HTTP_X_2"]
  end

  def test_content_length_over_the_body_limit_is_413
    assert_rejected 413, req("POST / HTTP/1.1", "Host: x\r\nContent-Length: #{LIMITS[3] + 1}\r\n")
  end

  def test_chunked_body_over_the_limit_is_413
    size = (LIMITS[3] + 1).to_s(16)
    assert_rejected 413, req("POST / HTTP/1.1", "Host: x\r\nTransfer-Encoding: chunked\r\n", "#{size}\r\n")
  end

  def test_trailers_count_against_the_header_limit
    assert_rejected 431, req("POST / HTTP/1.1", "Host: x\r\nTransfer-Encoding: chunked\r\n",
                             "0\r\nX-T: #{'t' * LIMITS[1]}\r\n\r\n")
  end

  def test_overlong_chunk_size_line_is_400
    ext = ";e=#{'x' * Narwhal::HttpParser::MAX_CHUNK_LINE}"
    assert_rejected 400, req("POST / HTTP/1.1", "Host: x\r\nTransfer-Encoding: chunked\r\n", "1#{ext}\r\na\r\n0\r\n\r\n")
  end

  # --- the API itself ---

  def test_offset_past_the_buffer_raises
    parser = Narwhal::HttpParser.new
    parser.configure(*LIMITS)
    assert_raises(ArgumentError) { parser.execute({}, "GET", 10) }
  end

  def test_error_carries_the_status
    parser = Narwhal::HttpParser.new
    parser.configure(*LIMITS)
    error = assert_raises(Narwhal::HttpParserError) { parser.execute({}, "GET / HTTP/2.0\r\n", 0) }
    assert_equal 505, error.status
  end

  def test_reset_allows_reuse_after_a_request
    parser = Narwhal::HttpParser.new
    parser.configure(*LIMITS)
    2.times do |i|
      env = {}
      parser.execute(env, req("GET /#{i} HTTP/1.1"), 0)
      assert parser.head_done?
      assert_equal "/#{i}", env["PATH_INFO"]
      parser.reset
    end
  end
end
