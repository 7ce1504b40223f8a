# frozen_string_literal: true

require "test_helper"

# The response head built in C: its status line, the app's fields checked,
# the framing it chooses for what the app set, and the connection's verdict.
class ResponseHeadTest < Minitest::Test
  HEAD = Narwhal::ResponseHead
  HTTP11_KEEPALIVE = HEAD::REQ_HTTP11 | HEAD::REQ_KEEPALIVE

  # [head without its date line, mode, keepalive?]
  def write(headers, body = nil, status: 200, flags: HTTP11_KEEPALIVE, keep_alive_line: nil, load_report: nil)
    head = HEAD.new(keep_alive_line, load_report)
    buf = String.new
    mode = head.write(buf, status, headers, body, flags)
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

  def test_the_status_line_has_the_reason_phrase_or_none_for_an_unknown_code
    { 200 => "OK", 201 => "Created", 301 => "Moved Permanently", 404 => "Not Found", 418 => "",
      422 => "Unprocessable Content", 503 => "Service Unavailable", 599 => "", 999 => "" }.each do |code, reason|
      buf, = write({}, [], status: code)
      assert buf.start_with?("HTTP/1.1 #{code} #{reason}\r\n"), buf.inspect
    end
    buf, = write({}, [], status: "404")
    assert buf.start_with?("HTTP/1.1 404 Not Found\r\n"), "a String status is read as a number"
  end

  def test_a_status_out_of_range_or_not_a_number_is_refused
    [99, 1000, -1, nil, 2.5].each do |status|
      assert_raises(Narwhal::ResponseError, status.inspect) { write({}, [], status: status) }
    end
  end

  def test_invalid_header_names_are_refused
    ["", "bad name", "bad:name", "bad\rname", "na\u00efve", "(x)"].each do |name|
      assert_raises(Narwhal::ResponseError, name.inspect) { write({ name => "v" }, []) }
    end
    assert_raises(Narwhal::ResponseError) { write({ x_sym: "v" }, []) }
  end

  def test_values_with_a_line_break_or_control_character_are_refused
    ["a\r\nInjected: yes", "a\rb", "a\u0000b", "a\u007fb", "a\u001bb"].each do |value|
      assert_raises(Narwhal::ResponseError, value.inspect) { write({ "x-v" => value }, []) }
    end
    # Rack 3: an Array element may hold no line break at all
    e = assert_raises(Narwhal::ResponseError) { write({ "set-cookie" => ["a=1\nInjected: yes"] }, []) }
    assert_match(/control character/, e.message)
    assert_raises(Narwhal::ResponseError) { write({ "x-v" => 5 }, []) }
    buf, = write({ "x-tab" => "a\tb" }, [])
    assert_includes buf, "\r\nx-tab: a\tb\r\n", "a tab is allowed"
  end

  def test_rack2_joined_values_are_split_and_rack3_arrays_give_a_line_each
    buf, = write({ "Set-Cookie" => "a=1\nb=2", "Vary" => "Accept" }, [])
    assert_includes buf, "\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nVary: Accept\r\n"
    buf, = write({ "set-cookie" => %w[a=1 b=2], "vary" => ["accept"] }, [])
    assert_includes buf, "\r\nset-cookie: a=1\r\nset-cookie: b=2\r\nvary: accept\r\n"
  end

  def test_rack_fields_are_not_sent
    buf, = write({ "rack.something" => "x", "x-ok" => "1" }, [])
    refute_includes buf, "rack."
    assert_includes buf, "x-ok: 1"
  end

  def test_an_array_body_is_measured_and_a_small_one_follows_the_head
    buf, mode, keepalive = write({}, %w[hel lo])
    assert_equal "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello", buf
    assert_equal [HEAD::DONE, true], [mode, keepalive]
    big = ["x" * (17 * 1024)]
    buf, mode, = write({}, big)
    assert_equal HEAD::LENGTH, mode, "a large body goes after the head, by the caller"
    assert buf.end_with?("content-length: #{17 * 1024}\r\n\r\n"), buf
  end

  def test_a_known_length_frames_by_length_an_unknown_one_by_chunks
    buf, mode, = write({}, 123)
    assert_equal HEAD::LENGTH, mode, "a file's length"
    assert_includes buf, "content-length: 123\r\n"
    buf, mode, keepalive = write({}, nil)
    assert_equal HEAD::CHUNKED, mode
    assert keepalive
    assert_includes buf, "transfer-encoding: chunked\r\n"
    buf, mode, keepalive = write({}, nil, flags: HEAD::REQ_KEEPALIVE)
    assert_equal HEAD::CLOSE, mode, "HTTP/1.0 has no chunks: the close ends the body"
    refute keepalive
    assert_includes buf, "connection: close\r\n"
  end

  def test_an_invalid_content_length_is_refused
    ["", "-1", "1.5", "12a", "99999999999999999999999"].each do |value|
      assert_raises(Narwhal::ResponseError, value.inspect) { write({ "content-length" => value }, nil) }
    end
  end

  def test_head_sends_the_head_alone
    buf, mode, = write({}, %w[hello], flags: HTTP11_KEEPALIVE | HEAD::REQ_HEAD)
    assert_equal "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n", buf, "GET's length, no body"
    assert_equal HEAD::DONE, mode
    buf, mode, keepalive = write({}, [], flags: HTTP11_KEEPALIVE | HEAD::REQ_HEAD)
    assert_equal "HTTP/1.1 200 OK\r\n\r\n", buf, "an empty body tells nothing of GET's length"
    assert_equal [HEAD::DONE, true], [mode, keepalive]
    buf, mode, = write({}, nil, flags: HTTP11_KEEPALIVE | HEAD::REQ_HEAD)
    assert_equal [HEAD::DONE, false], [mode, buf.include?("chunked")]
  end

  def test_1xx_204_and_304_have_no_body
    [[103, "Early Hints"], [204, "No Content"], [304, "Not Modified"]].each do |code, reason|
      buf, mode, keepalive = write({ "x-a" => "1" }, %w[ignored], status: code)
      assert_equal "HTTP/1.1 #{code} #{reason}\r\nx-a: 1\r\n\r\n", buf
      assert_equal [HEAD::DONE, true], [mode, keepalive]
    end
    [103, 204].each do |code|
      buf, = write({ "content-length" => "5", "transfer-encoding" => "chunked" }, nil, status: code)
      refute_match(/content-length|transfer-encoding/, buf, "#{code} must not announce a body")
    end
    buf, = write({ "content-length" => "5" }, nil, status: 304)
    assert_includes buf, "content-length: 5\r\n", "304 may tell the selected representation's length"
  end

  def test_the_connection_verdict
    buf, _, keepalive = write({}, [], keep_alive_line: "keep-alive: timeout=4\r\n")
    assert keepalive
    assert_equal "HTTP/1.1 200 OK\r\ncontent-length: 0\r\nkeep-alive: timeout=4\r\n\r\n", buf
    buf, _, keepalive = write({}, [], flags: HEAD::REQ_KEEPALIVE)
    assert keepalive
    assert_includes buf, "\r\nconnection: keep-alive\r\n", "an HTTP/1.0 client is told it stays"
    buf, _, keepalive = write({}, [], flags: HEAD::REQ_HTTP11)
    refute keepalive
    assert_includes buf, "\r\nconnection: close\r\n"
    ["close", "Close", %w[keep-alive close]].each do |value|
      buf, _, keepalive = write({ "Connection" => value }, [])
      refute keepalive, "the app asked to close: #{value.inspect}"
      assert_equal 1, buf.scan(/connection/i).size, "the server's own field only: #{buf.inspect}"
      assert_includes buf, "\r\nconnection: close\r\n"
    end
    buf, _, keepalive = write({ "connection" => "keep-alive" }, [])
    assert keepalive
    refute_match(/connection/i, buf, "the app's field is not passed on")
  end

  def test_a_protocol_switch_keeps_the_apps_connection_field_and_ends_keep_alive
    buf, _, keepalive = write({ "connection" => "upgrade", "upgrade" => "websocket" }, [], status: 101)
    assert_equal "HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: websocket\r\n\r\n", buf
    refute keepalive
  end

  def load_report
    board = Narwhal::Scoreboard.new(1, threads: 2)
    board.worker_slot(0).queued = 1
    Narwhal::LoadReport.new(board, 0, 2)
  end

  # orca_load_report: the report's line in each of the app's final
  # responses, the same line the report holds, after the app's fields.
  def test_the_load_report_goes_into_final_responses
    report = load_report
    line = "endpoint-load-metrics: #{report.value}\r\n"
    [200, 204, 304, 404, 503].each do |status|
      buf, = write({ "x-app" => "1" }, [], status: status, load_report: report)
      assert_equal 1, buf.scan(/^endpoint-load-metrics:/).size, "#{status}: #{buf.inspect}"
      assert_match(/x-app: 1\r\n(date: [^\r]*\r\n)?#{Regexp.escape(line)}/, buf, status)
    end
    assert_includes line, "named_metrics.queue=1"
    buf, = write({}, nil, status: 101, load_report: report)
    refute_match(/endpoint-load-metrics/, buf, "not in an interim response")
    buf, = write({}, [])
    refute_match(/endpoint-load-metrics/, buf, "off without a report")
  end

  # An app that reports its own load (either ORCA header, any case) is
  # left to do so: the server's report is not added beside it.
  def test_the_apps_own_load_report_wins
    report = load_report
    [{ "endpoint-load-metrics" => "TEXT cpu_utilization=0.5" }, { "Endpoint-Load-Metrics" => "TEXT eps=1" },
     { "endpoint-load-metrics-bin" => "CZqZmZmZmbk/" }].each do |headers|
      buf, = write(headers, [], load_report: report)
      assert_equal 1, buf.scan(/^endpoint-load-metrics/i).size, buf
      assert_includes buf, "#{headers.keys.first}: #{headers.values.first}\r\n"
    end
    buf, = write({ "endpoint-load-metrics" => "TEXT eps=1" }, [])
    assert_includes buf, "endpoint-load-metrics: TEXT eps=1\r\n", "without a report the app's passes as any field"
  end

  def test_a_load_report_must_be_one
    assert_raises(TypeError) { HEAD.new(nil, "TEXT eps=1") }
  end
end
