# frozen_string_literal: true

require "test_helper"

# A client that stops reading its response is dropped after write_timeout
# seconds without progress, for every kind of body; a slow reader that keeps
# taking bytes is not.
class WriteTimeoutTest < Minitest::Test
  CHUNK = "x" * 65_536
  APP = <<~RU
    CHUNK = "x" * 65_536
    File.binwrite("big.bin", CHUNK * 256) # 16 MiB: more than the socket buffers hold
    require "rack/files"
    FILES = Rack::Files.new(Dir.pwd)
    run lambda { |env|
      case env["PATH_INFO"]
      when "/each" then [200, { "content-type" => "text/plain" }, Enumerator.new { |y| 256.times { y << CHUNK } }]
      when "/file" then FILES.call(env.merge("PATH_INFO" => "/big.bin"))
      when "/array" then [200, { "content-type" => "text/plain" }, [CHUNK * 256]]
      else [200, { "content-type" => "text/plain", "content-length" => "2" }, ["ok"]]
      end
    }
  RU

  def self.server
    @server ||= Narwhal::ServerProcess.start(app: APP, config: "write_timeout 0.5\n").stop_after_run
  end

  def server = self.class.server

  def stalled_client(path)
    c = server.connect
    c.write("GET #{path} HTTP/1.1\r\nHost: x\r\n\r\n")
    c
  end

  %w[/each /file /array].each do |path|
    define_method("test_a_client_that_stops_reading_#{path[1..]}_is_dropped") do
      line = "write timeout: client took no data for 0.5s, closing (GET #{path})"
      before = server.log.scan(line).size # the tests share the server, and its log
      c = stalled_client(path)
      wait_until(timeout: 10, message: "write timeout logged for #{path}") { server.log.scan(line).size > before }
      # meanwhile and afterwards the server answers others
      other = server.connect
      other.write("GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
      assert_equal 200, other.read_response.status
      other.close
      # the stalled client finds the connection closed once it reads
      data = c.read_to_eof(10)
      assert_operator data.bytesize, :<, 16 * 1024 * 1024, "the whole body should not have been sent"
      c.close
    end
  end

  # Its own server, with room for a loaded machine: a pause of the test's
  # own process must not pass for the client's.
  def test_a_slow_but_steady_reader_gets_the_whole_body
    steady = Narwhal::ServerProcess.start(app: APP, config: "write_timeout 2\n")
    c = steady.connect
    c.write("GET /file HTTP/1.1\r\nHost: x\r\n\r\n")
    assert_equal "HTTP/1.1 200 OK", c.read_line
    nil until c.read_line.empty?
    # 1 MiB every 0.2 s: never 2 s without progress, about 3 s in all
    body = +""
    while body.bytesize < 16 * 1024 * 1024
      body << c.read_bytes(1024 * 1024, 5)
      sleep 0.2
    end
    assert_equal "x" * (16 * 1024 * 1024), body
    refute_includes steady.log, "write timeout"
  ensure
    c&.close
    steady&.stop
  end
end
