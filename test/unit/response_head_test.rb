# frozen_string_literal: true

require "test_helper"

# The response head built in C: the framing it chooses for what the app set.
class ResponseHeadTest < Minitest::Test
  HEAD = Narwhal::ResponseHead
  HTTP11_KEEPALIVE = HEAD::REQ_HTTP11 | HEAD::REQ_KEEPALIVE

  # [head without its date line, mode, keepalive?]
  def write(headers, body = nil)
    head = HEAD.new
    buf = String.new
    mode = head.write(buf, 200, headers, body, HTTP11_KEEPALIVE)
    [buf.sub(/^date: [^\r]*\r\n/, ""), mode, head.keepalive?]
  end

  def test_a_transfer_encoding_ending_in_chunked_keeps_the_connection
    ["chunked", "gzip, chunked", "gzip,chunked ", "gzip\nchunked", %w[gzip chunked], "GZIP, Chunked"].each do |te|
      _, mode, keepalive = write({ "transfer-encoding" => te })
      assert_equal HEAD::RAW, mode, te.inspect
      assert keepalive, "#{te.inspect}: the body carries its end"
    end
  end

  def test_a_transfer_encoding_not_ending_in_chunked_closes_the_connection
    ["gzip", "chunked, gzip", "xchunked", "gzip, notchunked", [], ["chunked", "gzip"], "chunked;q=1"].each do |te|
      buf, mode, keepalive = write({ "transfer-encoding" => te })
      assert_equal HEAD::RAW, mode, te.inspect
      refute keepalive, "#{te.inspect}: only the connection's end ends the body"
      assert_includes buf, "\r\nconnection: close\r\n", te.inspect
    end
  end

  # The codings are a comma-separated list (RFC 9112 6.1): an element that
  # only ends in "chunked" is not chunked, and the client cannot find the
  # body's end but by the connection's.
  def test_a_transfer_encoding_whose_last_element_only_ends_in_chunked_closes_the_connection
    ["x chunked", "gzip, x chunked", "\xB7 chunked".b, "gzip\nx\tchunked", ["gzip", "x chunked"]].each do |te|
      buf, mode, keepalive = write({ "transfer-encoding" => te })
      assert_equal HEAD::RAW, mode, te.inspect
      refute keepalive, "#{te.inspect}: only the connection's end ends the body"
      assert_includes buf, "\r\nconnection: close\r\n", te.inspect
    end
    ["gzip, \tchunked", "gzip ,chunked", "  chunked", "gzip\n chunked"].each do |te|
      _, mode, keepalive = write({ "transfer-encoding" => te })
      assert_equal HEAD::RAW, mode, te.inspect
      assert keepalive, "#{te.inspect}: the body carries its end"
    end
  end

  def test_content_length_beside_transfer_encoding_is_dropped_in_either_order
    [{ "content-length" => "99", "transfer-encoding" => "chunked", "x-after" => "1" },
     { "Transfer-Encoding" => "chunked", "x-after" => "1", "Content-Length" => "99" }].each do |headers|
      buf, = write(headers)
      refute_match(/content-length/i, buf)
      assert_match(/\r\nx-after: 1\r\n/, buf, "the fields around it are kept whole")
      assert buf.end_with?("\r\n\r\n"), buf.inspect
    end
  end

  def test_content_length_alone_is_kept_where_the_app_put_it
    buf, mode, keepalive = write({ "x-before" => "1", "content-length" => "5", "x-after" => "2" }, %w[hello])
    assert_equal "HTTP/1.1 200 OK\r\nx-before: 1\r\ncontent-length: 5\r\nx-after: 2\r\n\r\nhello", buf
    assert_equal HEAD::DONE, mode
    assert keepalive
  end

  # A Rack 2 Hash may hold the field twice, in two spellings: one line goes
  # on the wire, and none beside transfer-encoding.
  def test_a_content_length_given_twice_is_sent_once_and_dropped_beside_transfer_encoding
    buf, = write({ "Content-Length" => "5", "content-length" => "5" }, %w[hello])
    assert_equal 1, buf.scan(/content-length/i).size, buf.inspect
    buf, = write({ "Content-Length" => "5", "x-between" => "1", "content-length" => "5", "transfer-encoding" => "chunked" })
    refute_match(/content-length/i, buf)
    assert_match(/\r\nx-between: 1\r\n/, buf)
  end
end
