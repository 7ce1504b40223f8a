# frozen_string_literal: true

require "test_helper"
require "support/shared_server"
require "rack"

# One Rack::Lint-wrapped app that uses every part of the Rack SPEC the
# server implements: the env keys, each kind of body, both hijacks, early
# hints and the response callbacks. A SPEC violation on either side makes
# Lint raise, which the client sees as a 500. Runs under Rack 3 (default
# Gemfile) and Rack 2 (gemfiles/rack2.gemfile); only what Rack 2 does not
# define is guarded.
class RackComplianceTest < Minitest::Test
  RACK3 = Gem::Version.new(Rack.release) >= Gem::Version.new("3")

  APP = <<~'RU'
    require "rack"
    require "rack/files"
    RACK3 = Gem::Version.new(Rack.release) >= Gem::Version.new("3")
    File.binwrite("page.html", "<h1>file body</h1>\n" * 100)
    FILES = Rack::Files.new(Dir.pwd)
    TEXT = { "content-type" => "text/plain" }.freeze
    ENV_KEYS = %w[REQUEST_METHOD SCRIPT_NAME PATH_INFO QUERY_STRING SERVER_NAME SERVER_PORT SERVER_PROTOCOL
                  REMOTE_ADDR HTTP_HOST HTTP_X_TOKEN CONTENT_TYPE CONTENT_LENGTH rack.url_scheme rack.version
                  rack.multithread rack.multiprocess rack.run_once rack.hijack?].freeze

    module Events
      def self.record(line)
        File.open("events.log", "a") { |f| f.puts(line) }
      end
    end

    # responds to both: the SPEC says #each must win
    class EachAndCall
      def each
        yield "via each"
      end

      def call(stream)
        stream.write("via call")
        stream.close
      end
    end

    run lambda { |env|
      case env["PATH_INFO"]
      when "/env"
        input = env["rack.input"]
        lines = ENV_KEYS.map { |k| "#{k}=#{env[k].inspect}" }
        lines << "input=#{input.read.inspect}"
        lines << "hijack callable=#{env['rack.hijack'].respond_to?(:call)}"
        lines << "early_hints callable=#{env['rack.early_hints'].respond_to?(:call)}"
        lines << "response_finished=#{env['rack.response_finished'].class}"
        env["rack.errors"].write("compliance: rack.errors works\n")
        env["rack.errors"].flush
        [200, TEXT.dup, [lines.join("\n")]]
      when "/array" then [200, TEXT.dup, ["array ", "body"]]
      when "/each" then [200, TEXT.dup, Enumerator.new { |y| y << "each "; y << "body" }]
      when "/each-and-call" then [200, TEXT.dup, EachAndCall.new]
      when "/stream" then [200, TEXT.dup, ->(stream) { stream.write("streaming "); stream << "body"; stream.close }]
      when "/file" then FILES.call(env.merge("PATH_INFO" => "/page.html"))
      when "/hints"
        links = ["</style.css>; rel=preload; as=style", "</app.js>; rel=preload; as=script"]
        env["rack.early_hints"].call("link" => RACK3 ? links : links.join("\n"))
        [200, TEXT.dup, ["final"]]
      when "/partial-hijack"
        # bidirectional: read what the client sends after the head, answer, close
        hijack = lambda do |io|
          Thread.new do
            io.write("echo: #{io.read(5)}")
            io.close
          end
        end
        [200, TEXT.merge("rack.hijack" => hijack), []]
      when "/full-hijack"
        io = env["rack.hijack"].call
        Thread.new do
          io.write("HTTP/1.1 101 Switching Protocols\r\nupgrade: echo\r\nconnection: upgrade\r\n\r\n")
          io.write("echo: #{io.read(5)}")
          io.close
        end
        [200, {}, []]
      when "/finished"
        env["rack.response_finished"] << lambda { |e, status, headers, error|
          Events.record("finished #{e['PATH_INFO']} #{status} #{headers['content-type']} #{error.inspect}")
        }
        env["rack.after_reply"] << -> { Events.record("after_reply") }
        [200, TEXT.dup, ["callbacks"]]
      else [404, TEXT.dup, ["not found"]]
      end
    }
  RU

  include SharedServer
  serve(app: APP, config: "early_hints true\n")

  def get(client, path, version: "1.1")
    client.write("GET #{path} HTTP/#{version}\r\n#{version == '1.1' ? "Host: x\r\n" : ''}\r\n")
    client.read_response
  end

  def events
    path = File.join(server.dir, "events.log")
    File.exist?(path) ? File.read(path) : ""
  end

  def test_env_keys
    c = server.connect
    body = "name=narwhal"
    c.write("POST /env?a=1&b=2 HTTP/1.1\r\nHost: example.test:8080\r\nX-Token: abc\r\n" \
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: #{body.bytesize}\r\n\r\n#{body}")
    r = c.read_response
    assert_equal 200, r.status, r.body
    env = r.body.lines.to_h { |l| l.chomp.split("=", 2) }
    expected = {
      "REQUEST_METHOD" => '"POST"', "SCRIPT_NAME" => '""', "PATH_INFO" => '"/env"',
      "QUERY_STRING" => '"a=1&b=2"', "SERVER_NAME" => '"example.test"', "SERVER_PORT" => '"8080"',
      "SERVER_PROTOCOL" => '"HTTP/1.1"', "REMOTE_ADDR" => '"127.0.0.1"', "HTTP_HOST" => '"example.test:8080"',
      "HTTP_X_TOKEN" => '"abc"', "CONTENT_TYPE" => '"application/x-www-form-urlencoded"',
      "CONTENT_LENGTH" => '"12"', "rack.url_scheme" => '"http"', "rack.multithread" => "false",
      "rack.multiprocess" => "false", "rack.run_once" => "false", "rack.hijack?" => "true",
      "input" => '"name=narwhal"', "hijack callable" => "true", "early_hints callable" => "true",
      "response_finished" => "Array"
    }
    expected.each { |key, value| assert_equal value, env[key], key }
    assert_match(/\A\[\d+, \d+(, \d+)?\]\z/, env["rack.version"])
    wait_until(timeout: 5, message: "rack.errors output in the log") do
      server.log.include?("compliance: rack.errors works")
    end
  ensure
    c&.close
  end

  def test_enumerable_bodies
    c = server.connect
    assert_equal "array body", get(c, "/array").body
    assert_equal "each body", get(c, "/each").body
    # Rack 3 SPEC: a body with #each and #call is an Enumerable Body; Rack 2
    # only has #each (and Rack::Lint 2 does not even pass #call on)
    assert_equal "via each", get(c, "/each-and-call").body
  ensure
    c&.close
  end

  # Rack 2 defines no streaming bodies: the test exists only under Rack 3.
  if RACK3
    def test_streaming_body
      c = server.connect
      r = get(c, "/stream")
      assert_equal "chunked", r["transfer-encoding"]
      assert_equal "streaming body", r.body
      assert_equal "array body", get(c, "/array").body, "connection reusable after a streaming body"
    ensure
      c&.close
    end
  end

  def test_file_body
    c = server.connect
    r = get(c, "/file")
    expected = File.binread(File.join(server.dir, "page.html"))
    assert_equal expected.bytesize.to_s, r["content-length"]
    assert_equal expected, r.body
  ensure
    c&.close
  end

  def test_early_hints_arrive_before_the_final_response
    c = server.connect
    c.write("GET /hints HTTP/1.1\r\nHost: x\r\n\r\n")
    hints = c.read_response
    assert_equal "HTTP/1.1 103 Early Hints", hints.status_line
    assert_equal "</style.css>; rel=preload; as=style\n</app.js>; rel=preload; as=script", hints["link"]
    assert_equal "", hints.body
    final = c.read_response
    assert_equal "HTTP/1.1 200 OK", final.status_line
    assert_equal "final", final.body
    assert_equal "array body", get(c, "/array").body, "connection still in step"
  ensure
    c&.close
  end

  def test_no_early_hints_for_http10_clients
    c = server.connect
    r = get(c, "/hints", version: "1.0")
    assert_equal "HTTP/1.1 200 OK", r.status_line
    assert_equal "final", r.body
  ensure
    c&.close
  end

  def test_partial_hijack
    c = server.connect
    c.write("GET /partial-hijack HTTP/1.1\r\nHost: x\r\n\r\n")
    head = +""
    head << c.read_line << "\n" until head.end_with?("\n\n")
    assert_match(/\AHTTP\/1\.1 200 OK\ncontent-type: text\/plain\ndate: .+ GMT\n\n\z/, head)
    c.write("hello")
    assert_equal "echo: hello", c.read_to_eof
  ensure
    c&.close
  end

  def test_full_hijack
    c = server.connect
    c.write("GET /full-hijack HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: echo\r\n\r\n")
    r = c.read_response
    assert_equal "HTTP/1.1 101 Switching Protocols", r.status_line
    c.write("hello")
    assert_equal "echo: hello", c.read_to_eof
  ensure
    c&.close
  end

  def test_response_callbacks
    # rack.response_finished is Rack 3 SPEC; the server provides it (and
    # rack.after_reply) under Rack 2 as well, where Lint does not look at it
    c = server.connect
    assert_equal "callbacks", get(c, "/finished").body
    wait_until(timeout: 5, message: "callbacks") do
      events.include?("finished /finished 200 text/plain nil\n") && events.include?("after_reply\n")
    end
  ensure
    c&.close
  end
end
