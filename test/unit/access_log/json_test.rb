# frozen_string_literal: true

require "test_helper"
require_relative "../../support/access_log_lines"

# The JSON Lines format, read back from the file: every key, UTF-8 kept,
# escapes, and bytes that are not UTF-8 as code points.
class AccessLogJsonTest < Minitest::Test
  include Narwhal::AccessLogLines

  def test_json_line_parses_with_every_field
    writer(:json).record(ENV_GET.merge("HTTP_X_REQUEST_ID" => "req-1"), 201, {}, 5, 0.000214, 0.0015)
    line = lines.first
    assert line.end_with?("}\n")
    entry = JSON.parse(line)
    assert_equal({ "remote_addr" => "10.0.0.7", "remote_user" => nil, "method" => "GET", "uri" => "/a?b=1",
                   "protocol" => "HTTP/1.1", "status" => 201, "bytes" => 5, "duration" => 0.000214,
                   "queue_time" => 0.0015, "request_id" => "req-1", "referer" => "http://x/",
                   "user_agent" => "curl/7.88.1" }, entry.except("time"))
    assert_match(/\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d\z/, entry["time"])
    assert_in_delta Time.now.to_f, Time.iso8601(entry["time"]).to_f, 5
  end

  def test_json_escapes_and_keeps_utf8_and_invalid_bytes_stay_json
    env = { "REMOTE_ADDR" => "unix", "REQUEST_METHOD" => "GET", "REQUEST_URI" => "/\"a\"\\\t\x7f".b,
            "HTTP_USER_AGENT" => "caf\xC3\xA9 \u2603".b, "HTTP_REFERER" => "bad\xFF\xC3".b,
            "REMOTE_USER" => "caf\u00e9" }
    writer(:json).record(env, 200, nil, 0, nil, nil)
    assert_equal 1, lines.size
    entry = JSON.parse(lines.first)
    assert_equal "/\"a\"\\\t\u007f", entry["uri"]
    assert_equal "café ☃", entry["user_agent"]
    assert_equal "bad\u00ff\u00c3", entry["referer"]
    assert_equal "café", entry["remote_user"]
    assert_nil entry["protocol"]
    assert_nil entry["duration"]
  end

  def test_json_takes_surrogates_and_overlong_forms_as_bytes
    env = ENV_GET.merge("HTTP_USER_AGENT" => "\xED\xA0\x80".b, "HTTP_REFERER" => "\xC0\xAF".b,
                        "REMOTE_USER" => "\xF4\x90\x80\x80".b, "REQUEST_URI" => "/\xF0\x9F\x90\xB3".b)
    writer(:json).record(env, 200, nil, 0, nil, nil)
    entry = JSON.parse(lines.first)
    assert_equal ["\u00ed\u00a0\u0080", "\u00c0\u00af", "\u00f4\u0090\u0080\u0080", "/\u{1F433}"],
                 entry.values_at("user_agent", "referer", "remote_user", "uri")
  end
end
