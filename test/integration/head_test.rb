# frozen_string_literal: true

require "test_helper"
require "support/shared_server"
require "rack"

# Responses to HEAD as bytes on the wire: no body byte, no Content-Length the
# GET response would not have carried (RFC 9110 8.6, 9.3.2), no chunked
# framing, and the connection ready for the next request.
class HeadTest < Minitest::Test
  RACK3 = Gem::Version.new(Rack.release) >= Gem::Version.new("3")

  # Without Rack::Lint: Rack 2's Lint hides #to_ary, which would turn every
  # Array body below into a streamed one and test less.
  APP = <<~'RU'
    require "rack"
    TEXT = { "content-type" => "text/plain" }.freeze
    HELLO = ->(_env) { [200, TEXT.dup, ["hello world"]] }
    HEADED = Rack::Head.new(HELLO)

    run lambda { |env|
      case env["PATH_INFO"]
      when "/empty" then [200, TEXT.dup, []]
      when "/app-length" then [200, { "content-length" => "42" }, []]
      when "/rack-head" then HEADED.call(env)
      when "/each" then [200, TEXT.dup, %w[one two].each_entry]
      when "/callable" then [200, TEXT.dup, ->(stream) { stream.write("streamed"); stream.close }]
      when "/app-chunked" then [200, TEXT.merge("transfer-encoding" => "chunked"), ["5\r\nhello\r\n0\r\n\r\n"]]
      when "/raise" then raise "failed on purpose"
      else [200, TEXT.dup, ["ok"]]
      end
    }
  RU

  include SharedServer
  serve(app: APP, lint: false)

  def request(path, method: "HEAD", version: "1.1", headers: "")
    host = version == "1.1" ? "Host: x\r\n" : ""
    @c.write("#{method} #{path} HTTP/#{version}\r\n#{host}#{headers}\r\n")
  end

  # The response head exactly as sent, its date replaced by "D".
  def read_head
    lines = []
    while (line = @c.read_line) != ""
      lines << line
    end
    "#{lines.join("\r\n")}\r\n\r\n".sub(/^date: [^\r]+\r\n/, "date: D\r\n")
  end

  # A GET on the same connection: had the HEAD response carried any body
  # byte, this would not read as the next response.
  def assert_next_response_on_the_same_connection
    request("/ok", method: "GET")
    assert_equal "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ndate: D\r\ncontent-length: 2\r\n#{KEPT}\r\n", read_head
    assert_equal "ok", @c.read_bytes(2)
  end

  def test_empty_body_gets_no_content_length
    request("/empty")
    assert_equal "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ndate: D\r\n#{KEPT}\r\n", read_head
    assert_next_response_on_the_same_connection
  end

  def test_the_apps_own_content_length_is_kept
    request("/app-length")
    assert_equal "HTTP/1.1 200 OK\r\ncontent-length: 42\r\ndate: D\r\n#{KEPT}\r\n", read_head
    assert_next_response_on_the_same_connection
  end

  def test_rack_head_over_a_get_app_without_content_length
    request("/rack-head", method: "GET")
    assert_equal "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ndate: D\r\ncontent-length: 11\r\n#{KEPT}\r\n", read_head
    assert_equal "hello world", @c.read_bytes(11)
    request("/rack-head")
    assert_equal "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ndate: D\r\n#{KEPT}\r\n", read_head
    assert_next_response_on_the_same_connection
  end

  def test_streaming_bodies_get_neither_length_nor_chunked_framing
    %w[/each /callable].each do |path|
      request(path)
      assert_equal "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ndate: D\r\n#{KEPT}\r\n", read_head, path
    end
    assert_next_response_on_the_same_connection
  end

  def test_the_apps_own_transfer_encoding_is_kept_without_a_body
    request("/app-chunked")
    assert_equal "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\ndate: D\r\n#{KEPT}\r\n",
                 read_head
    assert_next_response_on_the_same_connection
  end

  def test_http10_keep_alive_after_head
    request("/empty", version: "1.0", headers: "Connection: keep-alive\r\n")
    assert_equal "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ndate: D\r\nconnection: keep-alive\r\n#{KEPT}\r\n",
                 read_head
    assert_next_response_on_the_same_connection
  end

  def test_server_error_answer_to_head_has_no_body
    request("/raise")
    assert_equal "HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\ndate: D\r\n" \
                 "content-length: 22\r\nconnection: close\r\n\r\n", read_head
    assert_equal "", @c.read_to_eof, "no body after a HEAD response"
  end
end
