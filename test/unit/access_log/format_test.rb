# frozen_string_literal: true

require "test_helper"
require_relative "../../support/access_log_lines"

# What both formats share (Format#record): values of any type, any bytes a
# client sends, the request id, and a line that cannot be built.
class AccessLogFormatTest < Minitest::Test
  include Narwhal::AccessLogLines

  def test_values_that_are_not_strings_and_numbers_out_of_range
    env = ENV_GET.merge("REMOTE_USER" => :alice, "HTTP_REFERER" => 42)
    log = writer(:combined)
    log.record(env, "404", { "x-request-id" => %w[a b] }, 3, -1.0, Float::NAN)
    log.record(ENV_GET, 200, nil, 0, 10**9, 12.3456789)
    first, second = lines.map { |l| COMBINED.match(l) }
    assert_equal ["alice", "404", "3", "42", "0.000000", "0.000000", "a, b"],
                 first.captures.values_at(1, 4, 5, 6, 8, 9, 10)
    assert_equal ["31536000.000000", "12.345679"], second.captures.values_at(8, 9), "capped at a year; rounded"
    @log.close
    File.write(@path, "")
    writer(:json).record(env, 201.0, { "x-request-id" => %w[a b] }, 3, Float::INFINITY, nil)
    entry = JSON.parse(lines.first)
    assert_equal ["alice", "42", 201, 31_536_000.0, "a, b"],
                 entry.values_at("remote_user", "referer", "status", "duration", "request_id")
  end

  # Whatever bytes a client sends, a combined line stays one line that
  # parses, and a JSON line stays JSON that gives the bytes back when they
  # were UTF-8, else each byte as the code point of its value.
  def test_random_bytes_never_break_a_line
    random = Random.new(20_261_123)
    sample = lambda do
      Array.new(random.rand(0..40)) { random.rand(4).zero? ? random.rand(256) : random.rand(0x20..0x7e) }.pack("C*")
    end
    combined = writer(:combined)
    200.times do
      combined.record(ENV_GET.merge("REQUEST_URI" => sample.call, "HTTP_USER_AGENT" => sample.call,
                                    "REMOTE_USER" => sample.call), 200, {}, 1, 0.1, nil)
    end
    assert_equal 200, lines.size
    lines.each { |l| assert_match COMBINED, l }
    @log.close
    File.write(@path, "")
    json = writer(:json)
    sent = Array.new(200) { sample.call }
    sent.each { |ua| json.record(ENV_GET.merge("HTTP_USER_AGENT" => ua), 200, {}, 1, 0.1, nil) }
    got = lines.map { |l| JSON.parse(l)["user_agent"] }
    assert_equal 200, got.size
    sent.zip(got).each do |ua, logged|
      utf8 = ua.dup.force_encoding(Encoding::UTF_8)
      assert_equal utf8.valid_encoding? ? utf8 : ua.bytes.map { |b| b.chr(Encoding::UTF_8) }.join, logged
    end
  end

  # A line the C builder refuses (a status that is no number) is counted
  # and logged; the response is not broken and the next line is written.
  def test_a_line_that_cannot_be_built_is_logged_not_raised
    log = writer(:combined)
    log.record(ENV_GET, Object.new, {}, 1, 0.1, nil)
    log.record(ENV_GET, 200, {}, 1, 0.1, nil)
    assert_equal 1, lines.size
    assert_match(/\Aaccess_log #{Regexp.escape(@path)}: NoMethodError: .*\(1 line\(s\) lost since the last report\)/m,
                 @errors.string[/access_log.*/m])
  end

  # The request's X-Request-Id (the client's or the proxy's) wins; without
  # one, the response's, as Rack 3 or Rack 2 spells the header.
  def test_the_request_id_is_the_requests_else_the_responses
    log = writer(:combined)
    log.record(ENV_GET.merge("HTTP_X_REQUEST_ID" => "from-proxy"), 200, { "x-request-id" => "from-app" }, 0, nil, nil)
    log.record(ENV_GET, 200, { "X-Request-Id" => "rack2" }, 0, nil, nil)
    log.record(ENV_GET, 200, {}, 0, nil, nil)
    assert_equal %w[from-proxy rack2 -], lines.map { |line| COMBINED.match(line)[11] }
    @log.close
    File.write(@path, "")
    writer(:json).record(ENV_GET, 200, { "x-request-id" => "from-app" }, 0, nil, nil)
    assert_equal "from-app", JSON.parse(lines.first)["request_id"]
  end
end
