# frozen_string_literal: true

require "test_helper"

# Narwhal::HttpParser through its Ruby API: the env it builds, the bodies it
# decodes and every request it rejects (with the status the server sends),
# as docs/HTTP.md describes them.
#
# Almost every case goes through parse_all_ways, which feeds the bytes the
# way the server does (unconsumed bytes are passed again at the returned
# offset) in several ways — whole, split in two, one byte at a time, and
# pipelined behind (and, when complete, ahead of) another request — and
# asserts that all of them give the same requests, bodies and status.
class HttpParserTest < Minitest::Test
  LIMITS = [1024, 4096, 20, 1 << 20].freeze # request line, header section, fields, body

  # requests: [[env, body], ...]; status: the HttpParserError status or nil;
  # pending: the input ended inside a request
  Result = Struct.new(:requests, :status, :pending)

  PRE = "GET /pre HTTP/1.1\r\nHost: pre.example\r\n\r\n"
  POST_REQ = "GET /post HTTP/1.1\r\nHost: post.example\r\n\r\n"
  CHUNKED = "Host: x\r\nTransfer-Encoding: chunked\r\n"

  def new_parser(limits = LIMITS)
    parser = Narwhal::HttpParser.new
    parser.configure(*limits)
    parser
  end

  # Parses a stream of pipelined requests fed in the given pieces.
  def parse(pieces, env_template: {}, limits: LIMITS)
    parser = new_parser(limits)
    buf = String.new(encoding: Encoding::BINARY)
    off = 0
    env = env_template.dup
    body = String.new(encoding: Encoding::BINARY)
    state = :head
    remaining = 0
    requests = []
    finish = lambda do
      requests << [env, body]
      parser.reset
      env = env_template.dup
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
    Result.new(requests, nil, state != :head || off < buf.bytesize)
  rescue Narwhal::HttpParserError => e
    Result.new(requests, e.status, false)
  end

  def comparable(result, skip: 0)
    [result.status, result.requests.drop(skip).map { |env, body| [env.sort_by(&:first), body] }]
  end

  # The same result whole, split in two, byte at a time and pipelined; returns it.
  def parse_all_ways(bytes, **opts)
    bytes = bytes.b
    whole = parse([bytes], **opts)
    half = bytes.bytesize / 2
    split = parse([bytes.byteslice(0, half), bytes.byteslice(half..)], **opts)
    bytewise = parse(bytes.each_char.to_a, **opts)
    assert_equal comparable(whole), comparable(split), "split in two differs"
    assert_equal comparable(whole), comparable(bytewise), "byte at a time differs"

    # behind another request: that one is served, then the same result
    [[PRE + bytes], (PRE + bytes).each_char.to_a].each do |pieces|
      behind = parse(pieces, **opts)
      assert_equal "/pre", behind.requests.first&.first&.fetch("PATH_INFO"), "pipelined: first request lost"
      assert_equal comparable(whole), comparable(behind, skip: 1), "pipelined behind a request differs"
    end
    # ahead of another request, when it is complete and accepted
    if whole.status.nil? && !whole.pending
      ahead = parse([bytes + POST_REQ], **opts)
      assert_nil ahead.status, "pipelined: the next request was rejected"
      assert_equal comparable(whole), comparable(Result.new(ahead.requests[0...-1], nil)),
                   "pipelined ahead of a request differs"
      assert_equal "/post", ahead.requests.last.first["PATH_INFO"], "pipelined: next request not parsed"
    end
    whole
  end

  # The env of the one request in bytes, which must be accepted.
  def env_of(bytes, **opts)
    r = parse_all_ways(bytes, **opts)
    assert_nil r.status, "rejected with #{r.status}"
    assert_equal 1, r.requests.size, "expected one complete request"
    r.requests.first.first
  end

  def body_of(bytes, **opts)
    r = parse_all_ways(bytes, **opts)
    assert_nil r.status, "rejected with #{r.status}"
    assert_equal 1, r.requests.size, "expected one complete request"
    r.requests.first.last
  end

  def assert_rejected(status, bytes, **opts)
    r = parse_all_ways(bytes, **opts)
    assert_equal status, r.status, "expected #{status} for #{bytes.inspect[0, 160]}"
    assert_empty r.requests
  end

  def req(head, fields = "Host: example.com\r\n", body = "")
    "#{head}\r\n#{fields}\r\n#{body}"
  end

  def post(fields, body = "")
    req("POST / HTTP/1.1", "Host: x\r\n#{fields}", body)
  end

  def chunked(body, fields = "")
    req("POST / HTTP/1.1", "#{CHUNKED}#{fields}", body)
  end

  # --- the env, key by key ---

  # Env keys and values the extension keeps for reuse (header names, the
  # host) stay right when GC.compact moves objects around.
  def test_reused_keys_survive_compaction
    request = "GET / HTTP/1.1\r\nHost: keep.example\r\nX-Kept-Name: 1\r\nAccept: */*\r\n\r\n"
    first = parse([request]).requests.first.first
    GC.verify_compaction_references(double_heap: true, toward: :empty)
    again = parse([request]).requests.first.first
    assert_equal first, again
    assert_equal %w[HTTP_ACCEPT HTTP_HOST HTTP_X_KEPT_NAME], again.keys.grep(/\AHTTP_[AHX]/).sort
    assert_equal "keep.example", again["SERVER_NAME"]
  end

  def test_request_method
    assert_equal "GET", env_of(req("GET / HTTP/1.1"))["REQUEST_METHOD"]
  end

  def test_request_method_is_kept_as_sent
    assert_equal "get", env_of(req("get / HTTP/1.1"))["REQUEST_METHOD"]
  end

  def test_methods_are_tokens
    %w[GET HEAD POST PUT DELETE PATCH PROPFIND M-SEARCH X.Y ~!#$%&'*+^_`|].each do |m|
      assert_equal m, env_of(req("#{m} / HTTP/1.1"))["REQUEST_METHOD"]
    end
  end

  def test_script_name_is_left_to_the_server
    refute env_of(req("GET /a HTTP/1.1")).key?("SCRIPT_NAME")
    env = env_of(req("GET /a HTTP/1.1"), env_template: { "SCRIPT_NAME" => "" })
    assert_equal "", env["SCRIPT_NAME"]
    assert_equal "/a", env["PATH_INFO"]
  end

  def test_path_info_and_request_path
    env = env_of(req("GET /a/b%2Fc/ HTTP/1.1"))
    assert_equal "/a/b%2Fc/", env["PATH_INFO"]
    assert_equal "/a/b%2Fc/", env["REQUEST_PATH"]
  end

  def test_path_info_is_not_shared_with_request_path
    env = env_of(req("GET /a HTTP/1.1"))
    refute_same env["PATH_INFO"], env["REQUEST_PATH"]
  end

  def test_query_string
    env = env_of(req("GET /a/b?x=1&y=2 HTTP/1.1"))
    assert_equal "/a/b", env["PATH_INFO"]
    assert_equal "x=1&y=2", env["QUERY_STRING"]
  end

  def test_query_string_keeps_later_question_marks
    assert_equal "a?b=?", env_of(req("GET /p?a?b=? HTTP/1.1"))["QUERY_STRING"]
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
    assert_equal "/p?q=1#frag", env["REQUEST_URI"]
  end

  def test_question_mark_after_fragment_is_not_a_query
    env = env_of(req("GET /p#f?x HTTP/1.1"))
    assert_equal "/p", env["PATH_INFO"]
    assert_equal "", env["QUERY_STRING"]
  end

  def test_request_uri_is_the_target_as_sent
    assert_equal "/a/../b?x=%20#y", env_of(req("GET /a/../b?x=%20#y HTTP/1.1"))["REQUEST_URI"]
  end

  def test_server_name_and_port_from_host
    env = env_of(req("GET / HTTP/1.1", "Host: example.com:8080\r\n"))
    assert_equal "example.com", env["SERVER_NAME"]
    assert_equal "8080", env["SERVER_PORT"]
  end

  def test_server_port_defaults_to_80
    assert_equal "80", env_of(req("GET / HTTP/1.1", "Host: example.com\r\n"))["SERVER_PORT"]
  end

  def test_server_port_defaults_to_443_when_the_listener_is_https
    env = env_of(req("GET / HTTP/1.1", "Host: example.com\r\n"), env_template: { "rack.url_scheme" => "https" })
    assert_equal "443", env["SERVER_PORT"]
  end

  def test_host_with_empty_port_defaults_the_port
    env = env_of(req("GET / HTTP/1.1", "Host: example.com:\r\n"))
    assert_equal "example.com", env["SERVER_NAME"]
    assert_equal "80", env["SERVER_PORT"]
  end

  def test_ipv4_host
    env = env_of(req("GET / HTTP/1.1", "Host: 192.0.2.7:81\r\n"))
    assert_equal "192.0.2.7", env["SERVER_NAME"]
    assert_equal "81", env["SERVER_PORT"]
  end

  def test_ipv6_host_literal
    env = env_of(req("GET / HTTP/1.1", "Host: [::1]:9292\r\n"))
    assert_equal "[::1]", env["SERVER_NAME"]
    assert_equal "9292", env["SERVER_PORT"]
    assert_equal "[::1]:9292", env["HTTP_HOST"]
  end

  def test_ipv6_host_literal_without_port
    env = env_of(req("GET / HTTP/1.1", "Host: [2001:db8::1]\r\n"))
    assert_equal "[2001:db8::1]", env["SERVER_NAME"]
    assert_equal "80", env["SERVER_PORT"]
  end

  def test_ipv6_host_literal_with_ipv4_suffix
    env = env_of(req("GET / HTTP/1.1", "Host: [::ffff:192.0.2.1]:1\r\n"))
    assert_equal "[::ffff:192.0.2.1]", env["SERVER_NAME"]
    assert_equal "1", env["SERVER_PORT"]
  end

  def test_host_without_host_field_keeps_the_listener_name
    template = { "SERVER_NAME" => "listener", "SERVER_PORT" => "9000" }
    env = env_of("GET /old HTTP/1.0\r\n\r\n", env_template: template)
    assert_equal "listener", env["SERVER_NAME"]
    assert_equal "9000", env["SERVER_PORT"]
    refute env.key?("HTTP_HOST")
  end

  def test_empty_host_keeps_the_listener_name
    template = { "SERVER_NAME" => "listener", "SERVER_PORT" => "9000" }
    env = env_of(req("GET / HTTP/1.1", "Host:\r\n"), env_template: template)
    assert_equal "listener", env["SERVER_NAME"]
    assert_equal "9000", env["SERVER_PORT"]
    assert_equal "", env["HTTP_HOST"]
  end

  def test_http_host
    assert_equal "Example.COM:8080", env_of(req("GET / HTTP/1.1", "hOsT: Example.COM:8080\r\n"))["HTTP_HOST"]
  end

  def test_server_protocol_and_http_version_11
    env = env_of(req("GET / HTTP/1.1"))
    assert_equal "HTTP/1.1", env["SERVER_PROTOCOL"]
    assert_equal "HTTP/1.1", env["HTTP_VERSION"]
  end

  def test_server_protocol_and_http_version_10
    env = env_of("GET /old HTTP/1.0\r\n\r\n")
    assert_equal "HTTP/1.0", env["SERVER_PROTOCOL"]
    assert_equal "HTTP/1.0", env["HTTP_VERSION"]
  end

  def test_http_12_to_19_are_served_as_11
    %w[1.2 1.9].each do |v|
      assert_equal "HTTP/1.1", env_of(req("GET / HTTP/#{v}"))["SERVER_PROTOCOL"]
    end
  end

  def test_version_field_is_not_http_version
    env = env_of(req("GET / HTTP/1.1", "Host: x\r\nVersion: 9\r\n"))
    assert_equal "HTTP/1.1", env["HTTP_VERSION"]
  end

  def test_content_type
    env = env_of(post("Content-Type: text/plain; charset=utf-8\r\nContent-Length: 2\r\n", "hi"))
    assert_equal "text/plain; charset=utf-8", env["CONTENT_TYPE"]
    refute env.key?("HTTP_CONTENT_TYPE")
  end

  def test_content_length
    env = env_of(post("content-length: 2\r\n", "hi"))
    assert_equal "2", env["CONTENT_LENGTH"]
    refute env.key?("HTTP_CONTENT_LENGTH")
  end

  def test_no_content_type_or_length_without_the_fields
    env = env_of(req("GET / HTTP/1.1"))
    refute env.key?("CONTENT_TYPE")
    refute env.key?("CONTENT_LENGTH")
  end

  def test_field_names_become_http_keys
    env = env_of(req("GET / HTTP/1.1", "Host: x\r\nX-Request-Id: abc\r\nuser-agent: t/1\r\nAccept-ENCODING: gzip\r\n"))
    assert_equal "abc", env["HTTP_X_REQUEST_ID"]
    assert_equal "t/1", env["HTTP_USER_AGENT"]
    assert_equal "gzip", env["HTTP_ACCEPT_ENCODING"]
  end

  def test_token_punctuation_in_field_names
    assert_equal "1", env_of(req("GET / HTTP/1.1", "Host: x\r\nX.!#$%&'*+^`|~: 1\r\n"))["HTTP_X.!#$%&'*+^`|~"]
  end

  def test_field_value_whitespace_is_trimmed
    env = env_of(req("GET / HTTP/1.1", "Host: x\r\nX-A: \t value with  inner \t \r\n"))
    assert_equal "value with  inner", env["HTTP_X_A"]
  end

  def test_field_value_without_space_after_colon
    assert_equal "v", env_of(req("GET / HTTP/1.1", "Host: x\r\nX-A:v\r\n"))["HTTP_X_A"]
  end

  def test_empty_field_value
    env = env_of(req("GET / HTTP/1.1", "Host: x\r\nX-Empty:\r\nX-Blank:   \r\n"))
    assert_equal "", env["HTTP_X_EMPTY"]
    assert_equal "", env["HTTP_X_BLANK"]
  end

  def test_repeated_fields_are_joined_with_comma
    env = env_of(req("GET / HTTP/1.1", "Host: x\r\nAccept: a\r\nAccept: b\r\naccept: c\r\n"))
    assert_equal "a, b, c", env["HTTP_ACCEPT"]
  end

  def test_repeated_fields_keep_empty_values
    assert_equal ", b", env_of(req("GET / HTTP/1.1", "Host: x\r\nX-A:\r\nX-A: b\r\n"))["HTTP_X_A"]
  end

  def test_repeated_cookies_are_joined_with_semicolon
    env = env_of(req("GET / HTTP/1.1", "Host: x\r\nCookie: a=1\r\ncookie: b=2\r\nCOOKIE: c=3\r\n"))
    assert_equal "a=1; b=2; c=3", env["HTTP_COOKIE"]
  end

  # Only the request's own fields are joined: an entry the env had before
  # its head (a template's) is replaced, and the template's value is left
  # as it was (it is shared by every request).
  def test_a_field_replaces_a_template_value_and_leaves_it_unchanged
    template = { "HTTP_X_A" => "t" }
    env = env_of(req("GET / HTTP/1.1", "Host: x\r\nX-A: a\r\nX-A: b\r\n"), env_template: template)
    assert_equal "a, b", env["HTTP_X_A"]
    assert_equal "t", template["HTTP_X_A"]
  end

  def test_underscore_field_does_not_override_dash_field
    env = env_of(req("GET / HTTP/1.1", "Host: x\r\nX-Forwarded-For: 1.1.1.1\r\nX_Forwarded_For: 6.6.6.6\r\n"))
    assert_equal "1.1.1.1", env["HTTP_X_FORWARDED_FOR"]
  end

  def test_underscore_field_before_dash_field_does_not_override_it
    env = env_of(req("GET / HTTP/1.1", "Host: x\r\nX_Forwarded_For: 6.6.6.6\r\nX-Forwarded-For: 1.1.1.1\r\n"))
    assert_equal "1.1.1.1", env["HTTP_X_FORWARDED_FOR"]
  end

  def test_underscore_field_is_used_when_alone
    assert_equal "v", env_of(req("GET / HTTP/1.1", "Host: x\r\nX_Custom: v\r\n"))["HTTP_X_CUSTOM"]
  end

  def test_bytes_above_0x7f_in_target_and_values_are_kept
    env = env_of(req("GET /caf\xC3\xA9 HTTP/1.1".b, "Host: x\r\nX-Snow: \xE2\x98\x83\r\n".b))
    assert_equal "/caf\xC3\xA9".b, env["PATH_INFO"].b
    assert_equal "\xE2\x98\x83".b, env["HTTP_X_SNOW"].b
  end

  def test_tab_inside_a_field_value_is_kept
    assert_equal "a\tb", env_of(req("GET / HTTP/1.1", "Host: x\r\nX-A: a\tb\r\n"))["HTTP_X_A"]
  end

  def test_empty_lines_before_the_request_line_are_ignored
    assert_equal "/x", env_of("\r\n\r\n#{req('GET /x HTTP/1.1')}")["PATH_INFO"]
  end

  # --- request-target forms ---

  def test_absolute_form_sets_host_path_and_scheme
    env = env_of(req("GET http://other.example:81/p/q?z=9 HTTP/1.1", "Host: ignored\r\n"))
    assert_equal "http", env["rack.url_scheme"]
    assert_equal "other.example", env["SERVER_NAME"]
    assert_equal "81", env["SERVER_PORT"]
    assert_equal "other.example:81", env["HTTP_HOST"]
    assert_equal "/p/q", env["PATH_INFO"]
    assert_equal "/p/q", env["REQUEST_PATH"]
    assert_equal "z=9", env["QUERY_STRING"]
    assert_equal "http://other.example:81/p/q?z=9", env["REQUEST_URI"]
  end

  def test_absolute_form_overrides_host_whatever_the_order
    env = env_of(req("GET http://a.example/ HTTP/1.1", "Host: b.example:99\r\n"))
    assert_equal "a.example", env["HTTP_HOST"]
    assert_equal "a.example", env["SERVER_NAME"]
    assert_equal "80", env["SERVER_PORT"]
  end

  def test_absolute_form_https_default_port
    env = env_of(req("GET https://secure.example/x HTTP/1.1", "Host: secure.example\r\n"))
    assert_equal "https", env["rack.url_scheme"]
    assert_equal "443", env["SERVER_PORT"]
  end

  def test_absolute_form_scheme_is_case_insensitive
    env = env_of(req("GET HTTPS://h.example/ HTTP/1.1", "Host: h.example\r\n"))
    assert_equal "https", env["rack.url_scheme"]
  end

  def test_absolute_form_without_path_is_slash
    env = env_of(req("GET http://h.example HTTP/1.1", "Host: h.example\r\n"))
    assert_equal "/", env["PATH_INFO"]
    assert_equal "/", env["REQUEST_PATH"]
  end

  def test_absolute_form_with_query_and_no_path
    env = env_of(req("GET http://h.example?x=1 HTTP/1.1", "Host: h.example\r\n"))
    assert_equal "/", env["PATH_INFO"]
    assert_equal "x=1", env["QUERY_STRING"]
  end

  def test_absolute_form_ipv6
    env = env_of(req("GET http://[2001:db8::7]:8080/v6 HTTP/1.1", "Host: x\r\n"))
    assert_equal "[2001:db8::7]", env["SERVER_NAME"]
    assert_equal "8080", env["SERVER_PORT"]
    assert_equal "[2001:db8::7]:8080", env["HTTP_HOST"]
    assert_equal "/v6", env["PATH_INFO"]
  end

  def test_absolute_form_in_http10_needs_no_host
    assert_equal "h.example", env_of("GET http://h.example/ HTTP/1.0\r\n\r\n")["SERVER_NAME"]
  end

  def test_options_asterisk
    env = env_of(req("OPTIONS * HTTP/1.1"))
    assert_equal "*", env["PATH_INFO"]
    assert_equal "*", env["REQUEST_URI"]
    assert_equal "", env["QUERY_STRING"]
  end

  def test_options_asterisk_in_http10
    env = env_of("OPTIONS * HTTP/1.0\r\n\r\n")
    assert_equal "*", env["PATH_INFO"]
    assert_equal "HTTP/1.0", env["SERVER_PROTOCOL"]
  end

  def test_connect_authority_form
    env = env_of(req("CONNECT example.com:443 HTTP/1.1", "Host: example.com:443\r\n"))
    assert_equal "CONNECT", env["REQUEST_METHOD"]
    assert_equal "example.com:443", env["REQUEST_URI"]
    assert_equal "example.com:443", env["PATH_INFO"]
    assert_equal "example.com", env["SERVER_NAME"]
    assert_equal "443", env["SERVER_PORT"]
  end

  # --- persistence and flags ---

  def flags(bytes)
    parser = new_parser
    parser.execute({}, bytes, 0)
    assert parser.head_done?
    parser
  end

  def test_http11_keeps_alive_by_default
    assert flags(req("GET / HTTP/1.1")).keepalive?
  end

  def test_connection_close
    refute flags(req("GET / HTTP/1.1", "Host: x\r\nConnection: close\r\n")).keepalive?
  end

  def test_connection_close_in_a_list_any_case
    refute flags(req("GET / HTTP/1.1", "Host: x\r\nConnection: Upgrade, CLOSE\r\n")).keepalive?
    refute flags(req("GET / HTTP/1.1", "Host: x\r\nConnection: te\r\nConnection: ,close,\r\n")).keepalive?
  end

  def test_http10_closes_by_default
    refute flags("GET / HTTP/1.0\r\n\r\n").keepalive?
  end

  def test_http10_keep_alive
    assert flags("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").keepalive?
    refute flags("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n").keepalive?
  end

  def test_http11_predicate
    assert flags(req("GET / HTTP/1.1")).http11?
    refute flags("GET / HTTP/1.0\r\n\r\n").http11?
  end

  def test_expect_continue_flag
    assert flags(req("PUT / HTTP/1.1", "Host: x\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n")).expect_continue?
    refute flags(req("PUT / HTTP/1.1", "Host: x\r\nContent-Length: 1\r\n")).expect_continue?
  end

  def test_content_length_and_chunked_predicates
    parser = flags(req("GET / HTTP/1.1"))
    assert_nil parser.content_length
    refute parser.chunked?
    parser = flags(post("Content-Length: 12\r\n"))
    assert_equal 12, parser.content_length
    refute parser.chunked?
    parser = flags(chunked(""))
    assert_nil parser.content_length
    assert parser.chunked?
  end

  # --- bodies ---

  def test_content_length_body
    assert_equal "hello", body_of(post("Content-Length: 5\r\n", "hello"))
  end

  def test_content_length_zero
    assert_equal "", body_of(post("Content-Length: 0\r\n"))
  end

  def test_leading_zeros_in_content_length
    assert_equal "abc", body_of(post("Content-Length: 003\r\n", "abc"))
  end

  def test_identical_repeated_content_length_is_accepted
    assert_equal "abc", body_of(post("Content-Length: 3\r\nContent-Length: 3\r\n", "abc"))
  end

  def test_identical_content_length_with_leading_zero_is_the_same_value
    assert_equal "abc", body_of(post("Content-Length: 3\r\nContent-Length: 03\r\n", "abc"))
  end

  def test_largest_content_length_is_2_pow_62_minus_1
    parser = new_parser([1024, 4096, 20, nil])
    parser.execute({}, post("Content-Length: #{(1 << 62) - 1}\r\n"), 0)
    assert_equal (1 << 62) - 1, parser.content_length
  end

  def test_chunked_body_with_extensions
    assert_equal "hello 0123456789",
                 body_of(chunked("5\r\nhello\r\n1;a=b;c=\"d e\"\r\n \r\nA\r\n0123456789\r\n0\r\n\r\n"))
  end

  def test_chunk_extension_grammar
    ['5;a', '5;a=b', '5 ; a = b', "5\t;\ta\t=\tb", '5;a="x\"y;z"', '5;a=b;c;d="";e=!#$', "5;a=\"\xE9\"".b].each do |line|
      assert_equal "hello", body_of(chunked("#{line}\r\nhello\r\n0;last=1\r\n\r\n")), line.inspect
    end
  end

  def test_chunk_size_is_case_insensitive_hex_with_leading_zeros
    assert_equal "0123456789abcdefghijk", body_of(chunked("000a\r\n0123456789\r\nB\r\nabcdefghijk\r\n0\r\n\r\n"))
  end

  def test_long_run_of_zeros_in_a_chunk_size_is_not_an_overflow
    assert_equal "a", body_of(chunked("#{'0' * 40}1\r\na\r\n#{'0' * 40}\r\n\r\n"))
  end

  def test_chunked_body_of_many_small_chunks
    data = ("a".."z").to_a
    assert_equal data.join, body_of(chunked("#{data.map { |c| "1\r\n#{c}\r\n" }.join}0\r\n\r\n"))
  end

  def test_chunked_without_trailers
    r = parse_all_ways(chunked("0\r\n\r\n"))
    assert_nil r.status
    assert_equal [""], r.requests.map(&:last)
  end

  def test_chunked_trailers_are_merged_when_absent
    env = env_of(chunked("1\r\na\r\n0\r\nX-Checksum: abc\r\nX-Seen: trailer\r\n\r\n", "X-Seen: head\r\n"))
    assert_equal "abc", env["HTTP_X_CHECKSUM"]
    assert_equal "head", env["HTTP_X_SEEN"]
  end

  def test_repeated_trailer_keeps_the_first
    assert_equal "1", env_of(chunked("0\r\nX-Sum: 1\r\nX-Sum: 2\r\n\r\n"))["HTTP_X_SUM"]
  end

  def test_forbidden_trailers_are_dropped
    env = env_of(chunked("1\r\na\r\n0\r\nContent-Length: 99\r\nHost: evil\r\nCookie: s=1\r\n" \
                         "Authorization: x\r\nIf-Match: *\r\nTransfer-Encoding: gzip\r\n\r\n"))
    assert_nil env["CONTENT_LENGTH"]
    assert_equal "x", env["HTTP_HOST"]
    %w[HTTP_COOKIE HTTP_AUTHORIZATION HTTP_IF_MATCH].each { |k| refute env.key?(k), k }
    assert_equal "chunked", env["HTTP_TRANSFER_ENCODING"]
  end

  def test_underscore_trailer_is_dropped
    refute env_of(chunked("0\r\nX_Trailer: 1\r\n\r\n")).key?("HTTP_X_TRAILER")
  end

  def test_transfer_encoding_is_case_insensitive
    assert_equal "", body_of(req("POST / HTTP/1.1", "Host: x\r\nTransfer-Encoding: CHUNKED\r\n", "0\r\n\r\n"))
  end

  def test_transfer_encoding_list_with_empty_elements
    assert_equal "ab", body_of(req("POST / HTTP/1.1", "Host: x\r\nTransfer-Encoding: , chunked ,\r\n", "2\r\nab\r\n0\r\n\r\n"))
  end

  def test_pipelined_requests_with_bodies
    stream = post("Content-Length: 3\r\n", "abc").sub("POST /", "POST /1") +
             chunked("2\r\nde\r\n0\r\n\r\n").sub("POST /", "POST /2") +
             req("GET /3 HTTP/1.1")
    r = parse_all_ways(stream)
    assert_nil r.status
    assert_equal(%w[/1 /2 /3], r.requests.map { |env, _| env["PATH_INFO"] })
    assert_equal(["abc", "de", ""], r.requests.map(&:last))
  end

  def test_pipelined_requests_do_not_share_fields
    r = parse_all_ways(req("GET /1 HTTP/1.1", "Host: x\r\nX-A: 1\r\n") + req("GET /2 HTTP/1.1", "Host: x\r\n"))
    assert_equal ["1", nil], r.requests.map { |env, _| env["HTTP_X_A"] }
  end

  def test_error_after_valid_pipelined_request_keeps_the_first
    r = parse_all_ways(req("GET /ok HTTP/1.1") + "GET /bad HTTP/1.1\r\nHost : x\r\n\r\n")
    assert_equal 400, r.status
    assert_equal(["/ok"], r.requests.map { |env, _| env["PATH_INFO"] })
  end

  # --- rejected: field syntax ---

  def test_rejects_space_before_colon
    assert_rejected 400, "GET / HTTP/1.1\r\nHost : x\r\n\r\n"
  end

  def test_rejects_tab_before_colon
    assert_rejected 400, "GET / HTTP/1.1\r\nHost: x\r\nX-A\t: 1\r\n\r\n"
  end

  def test_rejects_obs_fold_with_space
    assert_rejected 400, "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n  b\r\n\r\n"
  end

  def test_rejects_obs_fold_with_tab
    assert_rejected 400, "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n\tb\r\n\r\n"
  end

  def test_rejects_whitespace_before_the_first_field
    assert_rejected 400, "GET / HTTP/1.1\r\n Host: x\r\n\r\n"
  end

  def test_rejects_field_without_colon
    assert_rejected 400, "GET / HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n"
  end

  def test_rejects_empty_field_name
    assert_rejected 400, "GET / HTTP/1.1\r\nHost: x\r\n: v\r\n\r\n"
  end

  def test_rejects_field_name_that_is_not_a_token
    ["X(A)", "X A", "X/A", "X\"A", "X@A", "X\xC3\xA9"].each do |name|
      assert_rejected 400, "GET / HTTP/1.1\r\nHost: x\r\n#{name}: v\r\n\r\n".b
    end
  end

  def test_rejects_nul_in_field_name
    assert_rejected 400, "GET / HTTP/1.1\r\nHost: x\r\nX\0A: a\r\n\r\n"
  end

  def test_rejects_nul_in_field_value
    assert_rejected 400, "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n"
  end

  def test_rejects_bare_cr_in_field_value
    assert_rejected 400, "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n"
  end

  def test_rejects_bare_cr_at_end_of_field_value
    assert_rejected 400, "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\r\n\r\n"
  end

  def test_rejects_control_bytes_in_field_value
    ["\x01", "\x08", "\x0B", "\x0C", "\x1B", "\x1F", "\x7F"].each do |c|
      assert_rejected 400, "GET / HTTP/1.1\r\nHost: x\r\nX-A: a#{c}b\r\n\r\n"
    end
  end

  def test_rejects_two_content_types
    assert_rejected 400, post("Content-Type: a/b\r\nContent-Type: a/b\r\nContent-Length: 0\r\n")
  end

  def test_rejects_expect_other_than_100_continue_with_417
    assert_rejected 417, req("PUT / HTTP/1.1", "Host: x\r\nExpect: teapot\r\nContent-Length: 1\r\n", "a")
    assert_rejected 417, req("PUT / HTTP/1.1", "Host: x\r\nExpect: 100-continue, x\r\nContent-Length: 1\r\n", "a")
  end

  # --- rejected: Host ---

  def test_rejects_missing_host_in_http11
    assert_rejected 400, "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n"
  end

  def test_rejects_two_hosts
    assert_rejected 400, "GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"
  end

  def test_rejects_two_hosts_in_http10
    assert_rejected 400, "GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n"
  end

  def test_rejects_two_hosts_with_absolute_form
    assert_rejected 400, "GET http://a/ HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"
  end

  def test_rejects_invalid_host
    ["a b", "a:8x", "a:123456", ":80", "a/b", "a@b", "[::1", "[]", "[::1]x", "[::g]", "a:1:2"].each do |host|
      assert_rejected 400, "GET / HTTP/1.1\r\nHost: #{host}\r\n\r\n"
    end
  end

  # --- rejected: Content-Length and Transfer-Encoding ---

  def test_rejects_content_length_with_transfer_encoding
    assert_rejected 400, post("Content-Length: 3\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n")
  end

  def test_rejects_transfer_encoding_with_content_length
    assert_rejected 400, post("Transfer-Encoding: chunked\r\nContent-Length: 3\r\n", "0\r\n\r\n")
  end

  def test_rejects_conflicting_content_lengths
    assert_rejected 400, post("Content-Length: 3\r\nContent-Length: 4\r\n", "abcd")
  end

  def test_rejects_content_length_list
    assert_rejected 400, post("Content-Length: 3, 3\r\n", "abc")
  end

  def test_rejects_content_length_with_sign
    assert_rejected 400, post("Content-Length: +3\r\n", "abc")
    assert_rejected 400, post("Content-Length: -3\r\n", "abc")
  end

  def test_rejects_content_length_with_inner_space
    assert_rejected 400, post("Content-Length: 1 0\r\n", "0123456789")
  end

  def test_rejects_content_length_in_hex
    assert_rejected 400, post("Content-Length: 0x10\r\n")
    assert_rejected 400, post("Content-Length: a\r\n")
  end

  def test_rejects_content_length_with_other_characters
    ["3.0", "3e1", "3;", "\xEF\xBC\x93"].each { |v| assert_rejected 400, post("Content-Length: #{v}\r\n", "abc").b }
  end

  def test_rejects_empty_content_length
    assert_rejected 400, post("Content-Length: \r\n")
  end

  def test_rejects_content_length_overflow
    assert_rejected 400, post("Content-Length: 99999999999999999999999\r\n")
  end

  def test_rejects_content_length_that_would_wrap_to_a_small_value
    assert_rejected 400, post("Content-Length: 18446744073709551617\r\n", "x")
    assert_rejected 400, post("Content-Length: 18446744073709551616\r\n")
  end

  def test_rejects_content_length_of_2_pow_62
    assert_rejected 400, post("Content-Length: #{1 << 62}\r\n"), limits: [1024, 4096, 20, nil]
  end

  def test_rejects_long_digit_run_even_when_it_would_wrap_to_zero
    assert_rejected 400, post("Content-Length: #{'9' * 200}\r\n")
  end

  def test_rejects_transfer_encoding_not_ending_in_chunked
    assert_rejected 400, post("Transfer-Encoding: chunked, gzip\r\n", "0\r\n\r\n")
  end

  def test_rejects_unknown_transfer_codings
    %w[gzip identity deflate compress x-custom].each do |coding|
      assert_rejected 400, post("Transfer-Encoding: #{coding}\r\n", "abc")
      assert_rejected 400, post("Transfer-Encoding: #{coding}, chunked\r\n", "0\r\n\r\n")
    end
  end

  def test_rejects_transfer_coding_with_parameters
    assert_rejected 400, post("Transfer-Encoding: chunked;q=1\r\n", "0\r\n\r\n")
  end

  def test_rejects_chunked_twice
    assert_rejected 400, post("Transfer-Encoding: chunked, chunked\r\n", "0\r\n\r\n")
    assert_rejected 400, post("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n")
  end

  def test_rejects_empty_transfer_encoding
    assert_rejected 400, post("Transfer-Encoding: \r\n", "0\r\n\r\n")
  end

  def test_rejects_transfer_encoding_in_http10
    assert_rejected 400, "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
  end

  # --- rejected: chunked framing ---

  def test_rejects_chunk_size_that_is_not_hex
    assert_rejected 400, chunked("zz\r\nabc\r\n0\r\n\r\n")
    assert_rejected 400, chunked("g\r\n")
  end

  def test_rejects_empty_chunk_size
    assert_rejected 400, chunked("\r\nabc\r\n0\r\n\r\n")
  end

  def test_rejects_chunk_size_with_sign_or_prefix
    assert_rejected 400, chunked("-1\r\n")
    assert_rejected 400, chunked("+1\r\na\r\n0\r\n\r\n")
    assert_rejected 400, chunked("0x5\r\nhello\r\n0\r\n\r\n")
  end

  def test_rejects_whitespace_before_chunk_size
    assert_rejected 400, chunked(" 5\r\nhello\r\n0\r\n\r\n")
  end

  def test_rejects_whitespace_after_chunk_size_without_extension
    assert_rejected 400, chunked("5 \r\nhello\r\n0\r\n\r\n")
  end

  def test_rejects_chunk_size_overflow
    assert_rejected 400, chunked("#{'f' * 20}\r\n")
    assert_rejected 400, chunked("10000000000000000\r\nabc\r\n0\r\n\r\n")
  end

  def test_rejects_chunk_size_of_2_pow_62
    assert_rejected 400, chunked("4000000000000000\r\n"), limits: [1024, 4096, 20, nil]
  end

  def test_chunk_size_just_below_2_pow_62_is_only_too_large
    assert_rejected 413, chunked("3fffffffffffffff\r\n")
  end

  def test_rejects_malformed_chunk_extensions
    ["5;", "5;=x", "5;a=", "5;a b", "5;a=\"b", "5;a=b c", "5; a=\"\\\x01\"", "5;\x01", "5;a=\"\x7F\"", "5,a"].each do |line|
      assert_rejected 400, chunked("#{line}\r\nhello\r\n0\r\n\r\n")
    end
  end

  def test_rejects_bare_cr_in_chunk_size_line
    assert_rejected 400, chunked("5\rX\r\nhello\r\n0\r\n\r\n")
    assert_rejected 400, chunked("5;a=b\r\r\nhello\r\n0\r\n\r\n")
  end

  def test_rejects_bare_lf_after_chunk_size
    assert_rejected 400, chunked("5\nhello\r\n0\r\n\r\n")
  end

  def test_rejects_bare_lf_after_last_chunk
    assert_rejected 400, chunked("0\n\r\n")
  end

  def test_rejects_chunk_data_longer_than_its_size
    assert_rejected 400, chunked("5\r\nhelloX\r\n0\r\n\r\n")
  end

  def test_rejects_chunk_data_followed_by_bare_lf
    assert_rejected 400, chunked("5\r\nhello\n0\r\n\r\n")
  end

  def test_rejects_chunk_data_followed_by_lf_cr
    assert_rejected 400, chunked("5\r\nhello\n\r0\r\n\r\n")
  end

  def test_rejects_bare_lf_in_trailer
    assert_rejected 400, chunked("0\r\nX-T: y\n\r\n")
  end

  def test_rejects_bare_lf_ending_the_trailers
    assert_rejected 400, chunked("0\r\nX-T: y\r\n\n")
  end

  def test_rejects_malformed_trailer
    assert_rejected 400, chunked("0\r\nX-T : y\r\n\r\n")
    assert_rejected 400, chunked("0\r\nX-T: y\r\n folded\r\n\r\n")
    assert_rejected 400, chunked("0\r\nX-T: a\0b\r\n\r\n")
  end

  def test_rejects_malformed_forbidden_trailer_too
    assert_rejected 400, chunked("0\r\nHost: a\x01b\r\n\r\n")
  end

  # --- rejected: request line ---

  def test_rejects_nul_in_target
    assert_rejected 400, "GET /a\0b HTTP/1.1\r\nHost: x\r\n\r\n"
  end

  def test_rejects_nul_in_method
    assert_rejected 400, "GE\0T / HTTP/1.1\r\nHost: x\r\n\r\n"
  end

  def test_rejects_nul_before_the_request_line
    assert_rejected 400, "\0GET / HTTP/1.1\r\nHost: x\r\n\r\n"
  end

  def test_rejects_bare_cr_in_request_line
    assert_rejected 400, "GET /a\rb HTTP/1.1\r\nHost: x\r\n\r\n"
    assert_rejected 400, "GET / HTTP/1.1\r\r\nHost: x\r\n\r\n"
  end

  def test_rejects_control_bytes_and_del_in_target
    ["\x01", "\e", "\x7F", "\t"].each do |c|
      assert_rejected 400, "GET /a#{c}b HTTP/1.1\r\nHost: x\r\n\r\n"
    end
  end

  def test_rejects_space_in_target
    assert_rejected 400, "GET /a b HTTP/1.1\r\nHost: x\r\n\r\n"
  end

  def test_rejects_method_that_is_not_a_token
    ["GE(T", "G@T", "GE/T", "GÉT", "GET:"].each do |m|
      assert_rejected 400, "#{m} / HTTP/1.1\r\nHost: x\r\n\r\n".b
    end
  end

  def test_rejects_empty_method
    assert_rejected 400, " / HTTP/1.1\r\nHost: x\r\n\r\n"
  end

  def test_rejects_wrong_separators
    ["GET\t/ HTTP/1.1", "GET  / HTTP/1.1", "GET /  HTTP/1.1", "GET / HTTP/1.1 ", " GET / HTTP/1.1", "GET /\tHTTP/1.1"].each do |line|
      assert_rejected 400, "#{line}\r\nHost: x\r\n\r\n"
    end
  end

  def test_rejects_missing_parts
    ["GET", "GET /", "GET / ", "GET  HTTP/1.1", "/ HTTP/1.1"].each do |line|
      assert_rejected 400, "#{line}\r\nHost: x\r\n\r\n"
    end
  end

  def test_rejects_malformed_versions
    %w[http/1.1 HTTP/1 HTTP/1.x HTTP/11 HTTP/1.10 HTTP/a.1 HTTP-1.1 HTTPS/1.1 HTTP/1.1.1].each do |v|
      assert_rejected 400, "GET / #{v}\r\nHost: x\r\n\r\n"
    end
  end

  def test_rejects_relative_target
    assert_rejected 400, "GET a/b HTTP/1.1\r\nHost: x\r\n\r\n"
    assert_rejected 400, "GET ?a HTTP/1.1\r\nHost: x\r\n\r\n"
  end

  def test_rejects_asterisk_without_options
    assert_rejected 400, "GET * HTTP/1.1\r\nHost: x\r\n\r\n"
    assert_rejected 400, "options * HTTP/1.1\r\nHost: x\r\n\r\n"
  end

  def test_rejects_authority_form_without_connect
    assert_rejected 400, "GET example.com:80 HTTP/1.1\r\nHost: x\r\n\r\n"
  end

  def test_rejects_connect_without_port_or_with_a_path
    assert_rejected 400, "CONNECT example.com HTTP/1.1\r\nHost: x\r\n\r\n"
    assert_rejected 400, "CONNECT example.com:443/x HTTP/1.1\r\nHost: x\r\n\r\n"
  end

  def test_rejects_absolute_form_with_userinfo
    assert_rejected 400, "GET http://user:pw@h/ HTTP/1.1\r\nHost: h\r\n\r\n"
    assert_rejected 400, "GET http://@h/ HTTP/1.1\r\nHost: h\r\n\r\n"
  end

  def test_rejects_absolute_form_with_other_schemes
    %w[ftp://h/ ws://h/ httpx://h/ http:/h/ http:h 1http://h/ :// http://].each do |t|
      assert_rejected 400, "GET #{t} HTTP/1.1\r\nHost: h\r\n\r\n"
    end
  end

  def test_rejects_absolute_form_with_invalid_authority
    ["http://h:8x/", "http://[::1/", "http://h h/", "http://:80/"].each do |t|
      assert_rejected 400, "GET #{t} HTTP/1.1\r\nHost: h\r\n\r\n"
    end
  end

  def test_http2_version_is_505
    assert_rejected 505, "GET / HTTP/2.0\r\nHost: x\r\n\r\n"
  end

  def test_other_major_versions_are_505
    %w[0.9 3.0 9.9].each { |v| assert_rejected 505, "GET / HTTP/#{v}\r\nHost: x\r\n\r\n" }
  end

  def test_http2_preface_is_505
    assert_rejected 505, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
  end

  # --- bare LF (rejected everywhere, docs/HTTP.md) ---

  def test_rejects_bare_lf_after_request_line
    assert_rejected 400, "GET / HTTP/1.1\nHost: x\r\n\r\n"
  end

  def test_rejects_bare_lf_after_field
    assert_rejected 400, "GET / HTTP/1.1\r\nHost: x\n\r\n"
  end

  def test_rejects_bare_lf_ending_the_head
    assert_rejected 400, "GET / HTTP/1.1\r\nHost: x\r\n\n"
  end

  def test_rejects_bare_lf_as_an_empty_line_before_the_request
    assert_rejected 400, "\nGET / HTTP/1.1\r\nHost: x\r\n\r\n"
  end

  def test_rejects_bare_lf_only_head
    assert_rejected 400, "GET / HTTP/1.0\n\n"
  end

  def test_rejects_lf_cr_line_ending
    assert_rejected 400, "GET / HTTP/1.1\n\rHost: x\r\n\r\n"
  end

  # --- limits ---

  def test_request_line_at_the_limit_is_accepted
    path = "/#{'a' * (LIMITS[0] - "GET  HTTP/1.1\r\n".bytesize - 1)}"
    assert_equal path, env_of(req("GET #{path} HTTP/1.1"))["PATH_INFO"]
  end

  def test_request_line_over_the_limit_is_414
    assert_rejected 414, req("GET /#{'a' * LIMITS[0]} HTTP/1.1")
  end

  def test_request_line_one_byte_over_the_limit_is_414
    path = "/#{'a' * (LIMITS[0] - "GET  HTTP/1.1\r\n".bytesize)}"
    assert_rejected 414, req("GET #{path} HTTP/1.1")
  end

  def test_request_line_over_the_limit_without_end_is_414
    assert_rejected 414, "GET /#{'a' * (LIMITS[0] + 10)}"
  end

  def test_long_request_line_with_bare_lf_is_414_however_it_arrives
    assert_rejected 414, "GET /#{'a' * (LIMITS[0] + 10)}\nHost: x\r\n\r\n"
  end

  def test_empty_lines_count_towards_the_request_line_limit
    assert_rejected 414, "\r\n" * (LIMITS[0] / 2 + 1) + req("GET / HTTP/1.1")
  end

  def test_header_section_over_the_limit_is_431
    assert_rejected 431, req("GET / HTTP/1.1", "Host: x\r\nX-Big: #{'v' * LIMITS[1]}\r\n")
  end

  def test_header_section_over_the_limit_without_end_is_431
    assert_rejected 431, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: #{'v' * (LIMITS[1] + 10)}"
  end

  def test_header_section_at_the_limit_is_accepted
    # the header section counts every field line and the final CRLF
    value = "v" * (LIMITS[1] - "Host: x\r\nX-Big: \r\n\r\n".bytesize)
    assert_equal value, env_of(req("GET / HTTP/1.1", "Host: x\r\nX-Big: #{value}\r\n"))["HTTP_X_BIG"]
    assert_rejected 431, req("GET / HTTP/1.1", "Host: x\r\nX-Big: #{value}v\r\n")
  end

  def test_too_many_fields_is_431
    fields = "Host: x\r\n" + (1..LIMITS[2]).map { |i| "X-#{i}: v\r\n" }.join
    assert_rejected 431, req("GET / HTTP/1.1", fields)
  end

  def test_fields_at_the_limit_are_accepted
    fields = "Host: x\r\n" + (2..LIMITS[2]).map { |i| "X-#{i}: v\r\n" }.join
    assert_equal "v", env_of(req("GET / HTTP/1.1", fields))["HTTP_X_2"]
  end

  def test_field_name_over_256_bytes_is_431
    assert_rejected 431, req("GET / HTTP/1.1", "Host: x\r\n#{'N' * 257}: v\r\n")
    assert_equal "v", env_of(req("GET / HTTP/1.1", "Host: x\r\n#{'N' * 256}: v\r\n"))["HTTP_#{'N' * 256}"]
  end

  def test_content_length_over_the_body_limit_is_413
    assert_rejected 413, post("Content-Length: #{LIMITS[3] + 1}\r\n")
  end

  def test_content_length_at_the_body_limit_is_accepted
    parser = flags(post("Content-Length: #{LIMITS[3]}\r\n"))
    assert_equal LIMITS[3], parser.content_length
  end

  def test_chunked_body_over_the_limit_is_413
    assert_rejected 413, chunked("#{(LIMITS[3] + 1).to_s(16)}\r\n")
  end

  def test_chunks_adding_up_over_the_limit_are_413
    half = (LIMITS[3] / 2).to_s(16)
    assert_rejected 413, chunked("#{half}\r\n#{'a' * (LIMITS[3] / 2)}\r\n#{half}\r\n#{'b' * (LIMITS[3] / 2)}\r\n1\r\n")
  end

  def test_trailers_count_against_the_header_limit
    assert_rejected 431, chunked("0\r\nX-T: #{'t' * LIMITS[1]}\r\n\r\n")
  end

  def test_trailers_count_against_the_field_limit
    trailers = (1..LIMITS[2]).map { |i| "X-T#{i}: v\r\n" }.join
    assert_rejected 431, chunked("0\r\n#{trailers}\r\n")
  end

  def test_overlong_chunk_size_line_is_400
    ext = ";e=#{'x' * Narwhal::HttpParser::MAX_CHUNK_LINE}"
    assert_rejected 400, chunked("1#{ext}\r\na\r\n0\r\n\r\n")
  end

  def test_overlong_chunk_size_line_without_end_is_400
    assert_rejected 400, chunked("1;e=#{'x' * Narwhal::HttpParser::MAX_CHUNK_LINE}")
  end

  # --- the API itself ---

  def test_offset_past_the_buffer_raises
    assert_raises(ArgumentError) { new_parser.execute({}, "GET", 10) }
  end

  def test_error_carries_the_status
    error = assert_raises(Narwhal::HttpParserError) { new_parser.execute({}, "GET / HTTP/2.0\r\n", 0) }
    assert_equal 505, error.status
  end

  def test_incomplete_head_returns_the_start_of_the_pending_line
    parser = new_parser
    buf = +"GET / HTTP/1.1\r\nHost: x\r\nX-Par"
    assert_equal 25, parser.execute({}, buf, 0)
    refute parser.head_done?
    buf << "tial: 1\r\n\r\nrest"
    assert_equal buf.bytesize - 4, parser.execute({}, buf, 25)
    assert parser.head_done?
  end

  def test_decode_chunked_appends_to_the_output_string
    parser = new_parser
    buf = chunked("3\r\nabc\r\n0\r\n\r\n")
    off = parser.execute({}, buf, 0)
    out = +"kept:"
    assert_equal buf.bytesize, parser.decode_chunked({}, buf, off, out)
    assert_equal "kept:abc", out
    assert parser.body_done?
  end

  # Only a head with a proxy's stamp makes the server look for it in env.
  def test_queue_stamp_is_seen_in_the_head_only
    parser = new_parser
    stamped = ["X-Request-Start: t=1", "x-queue-start: 1", "X_Request_Start: 1"]
    stamped.each do |field|
      parser.execute({}, "GET / HTTP/1.1\r\nHost: x\r\n#{field}\r\n\r\n", 0)
      assert parser.queue_stamp?, field
      parser.reset
      refute parser.queue_stamp?, "reset: #{field}"
    end
    parser.execute({}, "GET / HTTP/1.1\r\nHost: x\r\nX-Request-Started: 1\r\n\r\n", 0)
    refute parser.queue_stamp?
    parser.reset
    buf = chunked("1\r\na\r\n0\r\nX-Request-Start: t=1\r\n\r\n")
    off = parser.execute({}, buf, 0)
    parser.decode_chunked({}, buf, off, +"")
    assert parser.body_done?
    refute parser.queue_stamp?, "not from a trailer"
  end

  def test_reset_allows_reuse_after_a_request
    parser = new_parser
    2.times do |i|
      env = {}
      parser.execute(env, req("GET /#{i} HTTP/1.1"), 0)
      assert parser.head_done?
      assert_equal "/#{i}", env["PATH_INFO"]
      parser.reset
    end
  end

  def test_reset_after_an_error_allows_reuse
    parser = new_parser
    assert_raises(Narwhal::HttpParserError) { parser.execute({}, "BAD\r\n", 0) }
    parser.reset
    env = {}
    parser.execute(env, req("GET /ok HTTP/1.1"), 0)
    assert_equal "/ok", env["PATH_INFO"]
  end
end
