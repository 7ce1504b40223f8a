# frozen_string_literal: true

require "test_helper"
require_relative "../../support/access_log_lines"

# The combined format (Apache's and nginx's, plus duration, queue time and
# request id), read back from the file: fields, dashes and escapes.
class AccessLogCombinedTest < Minitest::Test
  include Narwhal::AccessLogLines

  def test_combined_line
    writer(:combined).record(ENV_GET.merge("HTTP_X_REQUEST_ID" => "req-1"), 200, {}, 5, 0.000214, 0.0015)
    line = lines.first
    m = COMBINED.match(line)
    assert m, line
    assert_equal ["10.0.0.7", "-", "GET /a?b=1 HTTP/1.1", "200", "5", "http://x/", "curl/7.88.1", "0.000214",
                  "0.001500", "req-1"], m.captures.values_at(0, 1, 3..10)
    assert_in_delta Time.now.to_i, Time.strptime(m[3], "%d/%b/%Y:%H:%M:%S %z").to_i, 5
  end

  def test_combined_unknowns_are_dashes_and_the_request_id_may_come_from_the_response
    log = writer(:combined)
    log.record({ "REMOTE_ADDR" => "127.0.0.1" }, 400, nil, 12, nil, nil)
    log.record(ENV_GET.merge("HTTP_USER_AGENT" => ""), 200, { "x-request-id" => "from-app" }, 0, 0.5, nil)
    first, second = lines.map { |l| COMBINED.match(l) }
    assert_equal ["-", "400", "12", "-", "-", "-", "-", "-"], first.captures.values_at(3..10)
    assert_equal ["-", "from-app"], second.captures.values_at(7, 10)
  end

  def test_combined_escapes_what_would_break_the_line
    env = ENV_GET.merge("REQUEST_URI" => "/\"quoted\"\\x".b, "HTTP_USER_AGENT" => "evil\n127.0.0.1 - - fake\x01",
                        "HTTP_REFERER" => "caf\xC3\xA9".b, "REMOTE_USER" => "bob smith",
                        "HTTP_X_REQUEST_ID" => "id\"x")
    writer(:combined).record(env, 200, {}, 1, 0.1, nil)
    assert_equal 1, lines.size
    m = COMBINED.match(lines.first)
    assert m, lines.first
    assert_equal ['GET /\x22quoted\x22\x5Cx HTTP/1.1', 'caf\xC3\xA9', 'evil\x0A127.0.0.1 - - fake\x01', 'id\x22x'],
                 m.captures.values_at(3, 6, 7, 10)
    assert_equal 'bob\x20smith', m[2] # a bare field: its space escaped too
  end
end
