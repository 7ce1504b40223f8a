# frozen_string_literal: true

require "test_helper"

# Size limits on the request line, the header section and the body, with the
# defaults and with smaller values from a config file. Each limit is probed
# at its exact boundary: the largest allowed request is served, one byte (or
# field) more is answered by the server itself and the connection closed.
class LimitsTest < Minitest::Test
  APP = <<~'RU'
    hits = 0
    run lambda { |env|
      if env["PATH_INFO"] == "/hits"
        body = hits.to_s
      else
        hits += 1
        body = "#{env['PATH_INFO'].bytesize} #{env['rack.input'].read}"
      end
      [200, { "content-type" => "text/plain", "content-length" => body.bytesize.to_s }, [body]]
    }
  RU

  SMALL = <<~CONF
    max_request_line 1024
    max_header_size 2048
    max_header_fields 10
    client_max_body_size 10
  CONF

  REASONS = { 413 => "Content Too Large", 414 => "URI Too Long", 431 => "Request Header Fields Too Large" }.freeze

  KIB = 1024

  def self.servers
    @servers ||= {}
  end

  def server(config = nil)
    self.class.servers[config] ||=
      Narwhal::ServerProcess.start(app: APP, config: config).stop_after_run
  end

  def small
    server(SMALL)
  end

  def hits(srv)
    c = srv.connect
    c.write("GET /hits HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    Integer(c.read_response.body)
  ensure
    c&.close
  end

  # "GET /aaa HTTP/1.1\r\n" of exactly `bytes` bytes, CRLF included
  def request_line(bytes)
    "GET /#{'a' * (bytes - 16)} HTTP/1.1\r\n"
  end

  # A header section (fields and the empty line) of exactly `bytes` bytes.
  def header_section(bytes)
    "Host: x\r\nX-Big: #{'v' * (bytes - 20)}\r\n\r\n"
  end

  def fields(count)
    "Host: x\r\n#{(2..count).map { |i| "X-F#{i}: #{i}\r\n" }.join}\r\n"
  end

  def exchange(srv, bytes)
    c = srv.connect
    c.write(bytes)
    [c, c.read_response]
  end

  def assert_served(srv, request, body)
    c, r = exchange(srv, request)
    assert_equal "HTTP/1.1 200 OK", r.status_line
    assert_equal body, r.body
    c.write("GET /hits HTTP/1.1\r\nHost: x\r\n\r\n")
    assert_equal "HTTP/1.1 200 OK", c.read_response.status_line, "the connection stays open"
  ensure
    c&.close
  end

  def assert_rejected(srv, request, status)
    before = hits(srv)
    c, r = exchange(srv, request)
    assert_error(r, c, status)
    assert_equal before, hits(srv), "the app must not be called"
  ensure
    c&.close
  end

  def assert_error(response, client, status)
    message = "#{REASONS.fetch(status)}\n"
    assert_equal "HTTP/1.1 #{status} #{REASONS.fetch(status)}", response.status_line
    assert_equal "text/plain", response["content-type"]
    assert_equal message.bytesize.to_s, response["content-length"]
    assert_equal "close", response["connection"]
    assert_equal message, response.body
    assert client.closed?, "connection should be closed after #{status}"
  end

  def test_default_request_line_limit_is_16_kib
    assert_served(server, request_line(16 * KIB) + "Host: x\r\n\r\n", "#{16 * KIB - 15} ")
    assert_rejected(server, request_line(16 * KIB + 1) + "Host: x\r\n\r\n", 414)
  end

  def test_414_is_sent_before_an_overlong_request_line_ends
    c = server.connect
    c.write("GET /#{'a' * 16 * KIB}")
    assert_error(c.read_response, c, 414)
  ensure
    c&.close
  end

  def test_default_header_section_limit_is_112_kib
    assert_served(server, "GET / HTTP/1.1\r\n#{header_section(112 * KIB)}", "1 ")
    assert_rejected(server, "GET / HTTP/1.1\r\n#{header_section(112 * KIB + 1)}", 431)
  end

  def test_431_is_sent_before_an_overlong_header_section_ends
    c = server.connect
    c.write("GET / HTTP/1.1\r\nHost: x\r\nX-Big: #{'v' * 113 * KIB}")
    assert_error(c.read_response, c, 431)
  ensure
    c&.close
  end

  def test_default_field_count_limit_is_100
    assert_served(server, "GET / HTTP/1.1\r\n#{fields(100)}", "1 ")
    assert_rejected(server, "GET / HTTP/1.1\r\n#{fields(101)}", 431)
  end

  def test_field_names_longer_than_256_bytes
    assert_served(server, "GET / HTTP/1.1\r\nHost: x\r\n#{'n' * 256}: 1\r\n\r\n", "1 ")
    assert_rejected(server, "GET / HTTP/1.1\r\nHost: x\r\n#{'n' * 257}: 1\r\n\r\n", 431)
  end

  def test_default_body_limit_is_1_gib_and_checked_before_the_body
    c = server.connect
    c.write("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: #{1024**3 + 1}\r\n\r\n")
    assert_error(c.read_response, c, 413)
  ensure
    c&.close
  end

  def test_configured_request_line_limit
    assert_served(small, request_line(1024) + "Host: x\r\n\r\n", "#{1024 - 15} ")
    assert_rejected(small, request_line(1025) + "Host: x\r\n\r\n", 414)
  end

  def test_empty_lines_before_the_request_line_count_towards_its_limit
    assert_served(small, "\r\n#{request_line(1022)}Host: x\r\n\r\n", "#{1022 - 15} ")
    assert_rejected(small, "\r\n#{request_line(1023)}Host: x\r\n\r\n", 414)
  end

  def test_configured_header_section_limit
    assert_served(small, "GET / HTTP/1.1\r\n#{header_section(2048)}", "1 ")
    assert_rejected(small, "GET / HTTP/1.1\r\n#{header_section(2049)}", 431)
  end

  def test_configured_field_count_limit
    assert_served(small, "GET / HTTP/1.1\r\n#{fields(10)}", "1 ")
    assert_rejected(small, "GET / HTTP/1.1\r\n#{fields(11)}", 431)
  end

  # the head has 2 fields (Host, Transfer-Encoding): 8 trailers reach the limit of 10
  def test_trailer_fields_count_towards_the_field_limit
    head = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n"
    assert_served(small, head + fields(8).sub("Host: x\r\n", "X-F1: 1\r\n"), "1 ok")
    assert_rejected(small, head + fields(9).sub("Host: x\r\n", "X-F1: 1\r\n"), 431)
  end

  def test_configured_body_limit_with_content_length
    assert_served(small, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789", "1 0123456789")
    assert_rejected(small, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n0123456789a", 413)
  end

  def test_413_is_sent_before_the_body_is_read
    c = small.connect
    c.write("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n")
    assert_error(c.read_response, c, 413)
  ensure
    c&.close
  end

  def test_413_instead_of_100_continue
    c = small.connect
    c.write("POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 11\r\n\r\n")
    assert_error(c.read_response, c, 413)
  ensure
    c&.close
  end

  def test_configured_body_limit_with_chunked_bodies
    head = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    assert_served(small, "#{head}5\r\n01234\r\n5\r\n56789\r\n0\r\n\r\n", "1 0123456789")
    assert_rejected(small, "#{head}b\r\n0123456789a\r\n0\r\n\r\n", 413)
    assert_rejected(small, "#{head}5\r\n01234\r\n6\r\n56789a\r\n0\r\n\r\n", 413)
  end

  def test_chunked_413_is_sent_when_the_chunk_size_crosses_the_limit
    c = small.connect
    c.write("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n01234567\r\n3\r\n")
    assert_error(c.read_response, c, 413)
  ensure
    c&.close
  end
end
