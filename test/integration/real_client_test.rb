# frozen_string_literal: true

require "test_helper"
require "net/http"
require "open3"
require "digest"
require "stringio"

# Real HTTP clients (curl, Net::HTTP) against a real server: they must
# reuse one connection for several requests and get what they asked for.
class RealClientTest < Minitest::Test
  APP = <<~'RU'
    require "digest"

    run lambda { |env|
      body = env["rack.input"].read
      text = "#{env['REQUEST_METHOD']} #{env['PATH_INFO']} #{body.bytesize} #{Digest::SHA256.hexdigest(body)}"
      [200, { "content-type" => "text/plain", "x-path" => env["PATH_INFO"] }, [text]]
    }
  RU

  def self.server
    @server ||= Narwhal::ServerProcess.start(app: APP).stop_after_run
  end

  def server = self.class.server

  def url(path)
    "http://#{server.host}:#{server.port}#{path}"
  end

  def answer(method, path, body = "")
    "#{method} #{path} #{body.bytesize} #{Digest::SHA256.hexdigest(body)}"
  end

  def curl(*args)
    flunk "curl is required (bin/setup installs it)" unless system("command -v curl >/dev/null 2>&1")

    out, err, status = Open3.capture3("curl", "--silent", "--show-error", "--max-time", "10", *args)
    assert status.success?, "curl failed: #{err}"
    [out, err]
  end

  def test_curl_reuses_the_connection
    out, err = curl("-v", url("/one"), url("/two"))
    assert_equal answer("GET", "/one") + answer("GET", "/two"), out
    assert_match(/Re-using existing connection/, err)
    assert_equal 1, err.scan(/Connected to /).size, err
  end

  def test_curl_upload_with_expect_continue
    body = Random.new(7).bytes(3 * 1024 * 1024)
    path = File.join(server.dir, "upload.bin")
    File.binwrite(path, body)
    # curl asks for 100-continue before sending a body this large
    out, err = curl("-v", "-H", "Expect: 100-continue", "--data-binary", "@#{path}", url("/upload"))
    assert_equal answer("POST", "/upload", body), out
    assert_match(/HTTP\/1\.1 100 Continue/, err)
  end

  def test_curl_head
    out, = curl("--head", url("/head"))
    assert_match(/\AHTTP\/1\.1 200 OK\r\n/, out)
    assert_match(/^x-path: \/head\r\n/, out)
    assert out.end_with?("\r\n\r\n"), "no body after the head: #{out.inspect}"
  end

  def test_net_http_persistent_connection
    upload = Random.new(3).bytes(200_000)
    Net::HTTP.start(server.host, server.port) do |http|
      local_port = -> { http.instance_variable_get(:@socket).io.local_address.ip_port }

      r = http.get("/first")
      assert_equal "200", r.code
      assert_equal answer("GET", "/first"), r.body
      port = local_port.call

      r = http.post("/post", "form=data", "content-type" => "application/x-www-form-urlencoded")
      assert_equal answer("POST", "/post", "form=data"), r.body
      assert_equal port, local_port.call, "POST reused the connection"

      req = Net::HTTP::Post.new("/chunked")
      req["transfer-encoding"] = "chunked"
      req["content-type"] = "application/octet-stream"
      req.body_stream = StringIO.new(upload)
      r = http.request(req)
      assert_equal answer("POST", "/chunked", upload), r.body
      assert_equal port, local_port.call, "chunked upload reused the connection"

      r = http.head("/head")
      assert_equal "200", r.code
      assert_equal "/head", r["x-path"]
      assert_nil r.body
      assert_equal port, local_port.call, "HEAD reused the connection"

      r = http.get("/last")
      assert_equal answer("GET", "/last"), r.body
      assert_equal port, local_port.call, "GET after HEAD reused the connection"
    end
  end
end
