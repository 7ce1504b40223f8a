# frozen_string_literal: true

require "test_helper"
require "logger"
require "support/response_pair"

# Narwhal::ResponseWriter: a Rack response as the bytes a client reads and
# what becomes of the connection; the keep-alive line that kept-alive
# responses tell clients of the idle timeout, and that it is the server's alone.
class ResponseWriterTest < Minitest::Test
  include Narwhal::ResponsePair

  Out = Struct.new(:bytes) do
    def write(data)
      bytes << data
    end
  end

  def response(flags, headers = {}, keep_alive_line: Narwhal::ResponseWriter.keep_alive_line(5))
    out = Out.new(+"")
    Narwhal::ResponseWriter.new(Logger.new(nil), keep_alive_line).write(out, 200, headers, ["hi"], flags)
    out.bytes
  end

  def test_the_advertised_timeout_is_a_second_under_keepalive_timeout_in_whole_seconds
    assert_equal "keep-alive: timeout=4\r\n", Narwhal::ResponseWriter.keep_alive_line(5)
    assert_equal "keep-alive: timeout=74\r\n", Narwhal::ResponseWriter.keep_alive_line(75.9)
    assert_equal "keep-alive: timeout=1\r\n", Narwhal::ResponseWriter.keep_alive_line(2)
    assert_nil Narwhal::ResponseWriter.keep_alive_line(1.9)
    assert_nil Narwhal::ResponseWriter.keep_alive_line(0)
  end

  def test_only_a_response_that_keeps_its_connection_has_it
    keep = Narwhal::ResponseHead::REQ_HTTP11 | Narwhal::ResponseHead::REQ_KEEPALIVE
    assert_includes response(keep), "\r\nkeep-alive: timeout=4\r\n"
    closing = response(Narwhal::ResponseHead::REQ_HTTP11)
    assert_includes closing, "\r\nconnection: close\r\n"
    refute_includes closing, "keep-alive"
    refute_includes response(keep, keep_alive_line: nil), "keep-alive"
  end

  def test_the_apps_own_keep_alive_field_is_dropped
    keep = Narwhal::ResponseHead::REQ_HTTP11 | Narwhal::ResponseHead::REQ_KEEPALIVE
    bytes = response(keep, { "keep-alive" => "timeout=600" })
    assert_equal 1, bytes.scan(/keep-alive/i).size
    assert_includes bytes, "keep-alive: timeout=4\r\n"
    refute_includes response(Narwhal::ResponseHead::REQ_HTTP11, { "keep-alive" => "timeout=600" }), "keep-alive"
  end

  def test_the_answer_is_the_next_step_for_the_connection
    assert_same Narwhal::Next::KEEP, respond(200, {}, ["a"]).first
    assert_same Narwhal::Next::CLOSE, respond(200, {}, ["a"], Narwhal::ResponseHead::REQ_HTTP11).first
    assert_same Narwhal::Next::CLOSE, respond(200, { "connection" => "close" }, ["a"]).first, "the app asked to close"
    hijack = ->(io) { io.write("raw bytes") }
    result, got = respond(200, { "rack.hijack" => hijack }, [])
    assert_same Narwhal::Next::RELEASE, result
    assert got.start_with?("HTTP/1.1 200 OK\r\n"), got
    assert got.end_with?("\r\n\r\nraw bytes"), "the head first, then what the app wrote: #{got.inspect}"
  end

  def test_rack2_headers_keep_their_case_and_split_joined_values_into_lines
    _, got = respond(200, { "Content-Type" => "text/plain", "Set-Cookie" => "a=1\nb=2" }, ["ok"])
    assert_equal "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n" \
                 "content-length: 2\r\n#{KEPT}\r\nok", got
  end

  def test_rack3_array_values_are_one_line_each
    _, got = respond(200, { "content-type" => "text/plain", "set-cookie" => %w[a=1 b=2] }, ["ok"])
    assert_equal "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nset-cookie: a=1\r\nset-cookie: b=2\r\n" \
                 "content-length: 2\r\n#{KEPT}\r\nok", got
  end

  def test_headers_that_are_not_a_hash_are_read_by_each
    headers = Object.new
    headers.define_singleton_method(:each) { |&b| b.call("x-from-each", "1") }
    _, got = respond(200, headers, ["ok"])
    assert_includes got, "\r\nx-from-each: 1\r\n"
  end

  def test_an_invalid_header_raises_before_any_byte_is_sent
    error = assert_raises(Narwhal::ResponseError) { respond(200, { "x-bad" => "a\r\nInjected: yes" }, ["ok"]) }
    assert_match(/control character/, error.message)
    refute @writer.started, "nothing went out"
    assert_equal "", received
  end

  def test_head_bytesize_is_the_head_of_the_last_response
    respond(200, { "content-type" => "text/plain" }, ["a small body"])
    head = "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ndate: #{'x' * 29}\r\ncontent-length: 12\r\n#{KEPT}\r\n"
    assert_equal head.bytesize, @writer.head_bytesize
    assert @writer.started
  end

  def test_early_hints_are_a_103_head
    Narwhal::ResponseWriter.early_hints(@out, { "link" => "</a.css>; rel=preload" })
    assert_equal "HTTP/1.1 103 Early Hints\r\nlink: </a.css>; rel=preload\r\n\r\n", received
  end
end
