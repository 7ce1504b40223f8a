# frozen_string_literal: true

require "test_helper"

class SmokeTest < Minitest::Test
  def setup
    @server = Narwhal::ServerProcess.start(app: <<~'RU')
      run ->(env) { [200, { "content-type" => "text/plain" }, ["hi #{env['PATH_INFO']}"]] }
    RU
  end

  def teardown
    @server&.stop
  end

  def test_serves_a_request_and_keeps_the_connection
    c = @server.connect
    c.write("GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
    r = c.read_response
    assert_equal "HTTP/1.1 200 OK", r.status_line
    assert_equal "hi /a", r.body
    c.write("GET /b HTTP/1.1\r\nHost: x\r\n\r\n")
    assert_equal "hi /b", c.read_response.body
  ensure
    c&.close
  end
end
