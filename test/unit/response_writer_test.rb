# frozen_string_literal: true

require "test_helper"
require "logger"

# The keep-alive line: what kept-alive responses tell clients of the idle
# timeout, and that it is the server's alone.
class ResponseWriterTest < Minitest::Test
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
end
