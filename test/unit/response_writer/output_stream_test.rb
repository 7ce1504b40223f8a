# frozen_string_literal: true

require "test_helper"
require "support/response_pair"
require "support/fake_counters"

# Narwhal::ResponseWriter::OutputStream: body framing (length, chunked, to
# the close), as a client reads it from a real ResponseWriter over a socket pair.
class ResponseWriterOutputStreamTest < Minitest::Test
  include Narwhal::ResponsePair

  def test_a_body_with_its_content_length_goes_as_is
    result, got = respond(200, { "content-length" => "10" }, each_body("hello", "world"))
    assert_equal :keep, result
    assert_equal "HTTP/1.1 200 OK\r\ncontent-length: 10\r\n#{KEPT}\r\nhelloworld", got
  end

  def test_a_body_of_unknown_length_is_chunked_to_an_http11_client
    result, got = respond(200, {}, each_body("hello", "", "wörld"))
    assert_equal :keep, result
    assert_equal "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n#{KEPT}\r\n" \
                 "5\r\nhello\r\n6\r\nw\xC3\xB6rld\r\n0\r\n\r\n".b, got.b,
                 "empty parts send no chunk (it would end the body)"
  end

  def test_a_chunk_larger_than_the_coalescing_size_is_framed_whole
    big = "b" * (Narwhal::ResponseWriter::OutputStream::COALESCE_MAX + 1)
    _, got = respond(200, {}, each_body(big, "end"))
    body = got.split("\r\n\r\n", 2).last
    assert_equal "#{big.bytesize.to_s(16)}\r\n#{big}\r\n3\r\nend\r\n0\r\n\r\n", body
  end

  def test_a_body_of_unknown_length_to_an_http10_client_ends_with_the_connection
    result, got = respond(200, {}, each_body("hello", "world"), Narwhal::ResponseHead::REQ_KEEPALIVE)
    assert_equal :close, result
    assert_equal "HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nhelloworld", got
  end

  def test_head_sends_no_body
    parts = []
    body = Object.new
    body.define_singleton_method(:each) { |&b| %w[never sent].each { |part| parts << part && b.call(part) } }
    result, got = respond(200, { "content-length" => "9" }, body, HEAD11)
    assert_equal :keep, result
    assert_equal "HTTP/1.1 200 OK\r\ncontent-length: 9\r\n#{KEPT}\r\n", got
    assert_empty parts, "the body is not even iterated"
  end

  def test_204_and_304_send_no_body
    [204, 304].each do |status|
      result, got = respond(status, { "content-type" => "text/plain" }, each_body("ignored"))
      assert_equal :keep, result
      assert got.end_with?("#{KEPT}\r\n"), "#{status}: #{got.inspect}"
      refute_includes got, "ignored"
      refute_match(/transfer-encoding|content-length: [1-9]/, got)
    end
  end

  def test_a_rack3_streaming_body_gets_the_stream_and_is_chunked
    seen = nil
    streaming = lambda do |stream|
      stream.write("hello ")
      stream << "wor" << "ld"
      seen = [stream.closed?, stream.flush.equal?(stream)]
      stream.close
      seen << stream.closed?
      stream.write("after close")
    end
    result, got = respond(200, {}, streaming)
    assert_equal :keep, result
    assert_equal "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n#{KEPT}\r\n" \
                 "6\r\nhello \r\n3\r\nwor\r\n2\r\nld\r\n0\r\n\r\n", got
    assert_equal [false, true, true], seen
  end

  def test_a_streaming_body_can_read_what_the_client_sends
    @client.write("ping")
    read = nil
    _, got = respond(200, { "content-length" => "4" }, ->(stream) { stream.write(read = stream.read(4)) })
    assert_equal "ping", read
    assert got.end_with?("\r\n\r\nping"), got
  end

  def test_a_to_path_body_sends_the_file
    Tempfile.create("body") do |file|
      file.write("from the file\n")
      file.flush
      body = Object.new
      body.define_singleton_method(:to_path) { file.path }
      body.define_singleton_method(:each) { |&_| raise "each is not used for a file" }
      result, got = respond(200, { "content-type" => "text/plain" }, body)
      assert_equal :keep, result
      assert_equal "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 14\r\n#{KEPT}\r\n" \
                   "from the file\n", got
    end
  end

  def test_a_to_path_body_whose_file_is_gone_is_iterated_instead
    body = Object.new
    body.define_singleton_method(:to_path) { "/nonexistent/narwhal-body" }
    body.define_singleton_method(:each) { |&b| b.call("from each") }
    _, got = respond(200, {}, body)
    assert_equal "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n#{KEPT}\r\n9\r\nfrom each\r\n0\r\n\r\n", got
  end

  def test_a_body_shorter_than_its_content_length_closes_the_connection
    result, got = respond(200, { "content-length" => "10" }, each_body("short"))
    assert_equal :close, result
    assert got.end_with?("\r\n\r\nshort"), got
    assert_match(/response body shorter than content-length by 5 bytes; closing connection/, @log.string)
  end

  def test_a_body_longer_than_its_content_length_is_cut_and_closes_the_connection
    result, got = respond(200, { "content-length" => "4" }, each_body("abc", "def", "ghi"))
    assert_equal :close, result
    assert got.end_with?("\r\n\r\nabcd"), got
    assert_equal 1, @log.string.scan("response body longer than content-length").size, "logged once"
  end

  # The error unwinds the writer: the Responder (real here) closes the
  # connection; the client has the head and what went before, never the
  # last chunk, so it sees the body cut short.
  def test_an_error_raised_mid_body_closes_the_connection
    body = Object.new
    body.define_singleton_method(:each) do |&b|
      b.call("first")
      raise IOError, "the body broke"
    end
    slot = Narwhal::Scoreboard.new(1).thread_slot(0, 0)
    responder = Narwhal::Responder.new(->(_env) { [200, {}, body] }, Logger.new(@log), slot, FakeCounters.new)
    request = Narwhal::Request.new({ "SCRIPT_NAME" => "" }, @out, "127.0.0.1")
    env = request.start
    env["REQUEST_METHOD"] = "GET"
    env["PATH_INFO"] = "/broken"
    request.complete(nil, true, true)
    assert_equal :close, responder.respond(request)
    got = received
    assert got.end_with?("\r\n\r\n5\r\nfirst\r\n"), got
    refute_includes got, "0\r\n\r\n"
    assert_match(%r{app error: IOError: the body broke \(GET /broken\)}, @log.string)
  end

  def test_finish_says_whether_the_connection_may_be_reused
    head = Narwhal::ResponseHead
    chunked = Narwhal::ResponseWriter::OutputStream.new(@out, head::CHUNKED, -1, Logger.new(@log))
    assert_equal 5, chunked.write("hello")
    assert chunked.finish
    assert chunked.finish, "twice: the same answer, no second last chunk"
    assert_equal "5\r\nhello\r\n0\r\n\r\n", received
    refute Narwhal::ResponseWriter::OutputStream.new(@out, head::CLOSE, -1, Logger.new(@log)).finish
  end
end
