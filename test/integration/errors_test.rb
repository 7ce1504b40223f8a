# frozen_string_literal: true

require "test_helper"

# What goes wrong on the response side: apps that raise, responses with
# headers that must never reach the wire, and clients that go away. The
# client gets a plain 500 that leaks nothing, the log gets the details, and
# the server keeps serving without leaking descriptors.
class ErrorsTest < Minitest::Test
  # Rack::Lint would reject the invalid headers before the server saw them.
  APP = <<~'RU'
    require "rack/files"
    BIG = "x" * 65_536
    File.binwrite("big.bin", BIG * 256) # 16 MiB: more than the socket buffers hold
    FILES = Rack::Files.new(Dir.pwd)

    run lambda { |env|
      case env["PATH_INFO"]
      when "/ok" then [200, { "content-type" => "text/plain" }, ["ok"]]
      when "/name-space" then [200, { "bad name" => "v" }, ["secret body"]]
      when "/name-colon" then [200, { "bad:name" => "v" }, ["secret body"]]
      when "/value-cr" then [200, { "x-cr" => "secret\rinjected: 1" }, ["secret body"]]
      when "/value-lf" then [200, { "x-lf" => ["secret\ninjected: 1"] }, ["secret body"]]
      when "/value-nul" then [200, { "x-nul" => "secret\0" }, ["secret body"]]
      when "/value-int" then [200, { "x-int" => 42 }, ["secret body"]]
      when "/raise" then raise ArgumentError, "secret-token-123"
      when "/raise-syscall" then File.read("/nonexistent/secret-path")
      when "/raise-in-body"
        [200, { "content-type" => "text/plain" }, Enumerator.new { |y|
          y << "first"
          raise "body failed"
        }]
      when "/big-file" then FILES.call(env.merge("PATH_INFO" => "/big.bin"))
      when "/big" then [200, { "content-type" => "text/plain" }, Enumerator.new { |y| 512.times { y << BIG } }]
      when "/slow"
        sleep 0.2 # an app still working when its client leaves
        [200, { "content-type" => "text/plain" }, ["late"]]
      end
    }
  RU

  PLAIN_500 = "HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\ndate: D\r\n" \
              "content-length: 22\r\nconnection: close\r\n\r\nInternal Server Error\n"

  def self.server
    @server ||= Narwhal::ServerProcess.start(app: APP, lint: false).tap do |s|
      s.stop_after_run
      @idle_fds = s.connection_fds
    end
  end


  class << self
    attr_reader :idle_fds
  end

  def server = self.class.server

  def get(path, client = server.connect)
    client.write("GET #{path} HTTP/1.1\r\nHost: x\r\n\r\n")
    client
  end

  # Everything the server sent before closing, with the date replaced by "D".
  def whole_response(path)
    c = get(path)
    c.read_to_eof.sub(/^date: [^\r]+\r\n/, "date: D\r\n")
  ensure
    c&.close
  end

  def assert_still_serving
    c = get("/ok")
    assert_equal "ok", c.read_response.body
  ensure
    c&.close
  end

  def assert_fds_back_to_idle
    idle = self.class.idle_fds
    wait_until(timeout: 5, message: "server descriptors back to #{idle}") { server.connection_fds == idle }

  end

  def assert_logged(pattern)
    wait_until(timeout: 5, message: "log matching #{pattern.inspect}") { server.log.match?(pattern) }
  end

  def test_invalid_header_names_give_a_plain_500
    { "/name-space" => "bad name", "/name-colon" => "bad:name" }.each do |path, name|
      assert_equal PLAIN_500, whole_response(path)
      assert_logged(/ResponseError: invalid response header name "#{name}" \(GET #{path}\)/)
    end
    assert_still_serving
  end

  def test_invalid_header_values_give_a_plain_500
    %w[cr lf nul int].each do |kind|
      response = whole_response("/value-#{kind}")
      assert_equal PLAIN_500, response
      refute_includes response, "secret"
      refute_includes response, "injected"
      assert_logged(/ResponseError: response header "x-#{kind}" .* \(GET \/value-#{kind}\)/)
    end
    assert_logged(/"x-int" has a non-String value \(Integer\)/)
    assert_still_serving
  end

  def test_app_exception_gives_a_plain_500_and_is_logged_in_full
    response = whole_response("/raise")
    assert_equal PLAIN_500, response
    refute_includes response, "secret-token-123"
    refute_includes response, "ArgumentError"
    assert_logged(/app error: ArgumentError: secret-token-123 \(GET \/raise\)\n.*config\.ru:\d+:in /)
    assert_still_serving
  end

  def test_app_raising_a_system_call_error_is_an_app_error_too
    response = whole_response("/raise-syscall")
    assert_equal PLAIN_500, response
    refute_includes response, "secret-path"
    assert_logged(/app error: Errno::ENOENT: .*secret-path \(GET \/raise-syscall\)/)
    assert_still_serving
  end

  def test_body_raising_after_the_head_cuts_the_response_and_closes
    c = get("/raise-in-body")
    raw = c.read_to_eof
    assert_match(/\AHTTP\/1\.1 200 OK\r\n.*transfer-encoding: chunked\r\n#{KEPT}\r\n5\r\nfirst\r\n\z/m, raw,
                 "no terminating chunk: the client must see the body is incomplete")
    assert_logged(/app error: RuntimeError: body failed \(GET \/raise-in-body\)/)
    assert_still_serving
  ensure
    c&.close
  end

  def test_client_gone_mid_request_head
    c = server.connect
    c.write("GET /ok HTTP/1.1\r\nHost: x\r\nX-Partial: ")
    c.close
    assert_still_serving
    assert_fds_back_to_idle
  end

  def test_client_gone_mid_request_body
    c = server.connect
    c.write("POST /ok HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n#{'b' * 5000}")
    c.close
    assert_still_serving
    assert_fds_back_to_idle
  end

  def test_client_gone_while_the_app_runs
    c = get("/slow")
    c.close
    assert_still_serving
    assert_fds_back_to_idle
  end

  def test_client_gone_mid_response
    %w[/big /big-file /big /big-file].each do |path|
      c = get(path)
      assert_equal "HTTP/1.1 200 OK", c.read_line
      c.read_bytes(100_000)
      c.close
    end
    assert_still_serving
    assert_fds_back_to_idle
    # a client leaving is not an app error
    refute_match(/internal error|\(GET \/big/, server.log)
  end
end
