# frozen_string_literal: true

require "test_helper"
require "net/http"
require "json"
require "digest"
require "base64"
require "securerandom"
require_relative "../support/rails_app"

# What a browser, an API client and Action Cable do to the Rails app
# (test/apps/rails), whichever way narwhal was started. A test class that
# includes this defines `self.start_server`; its server is started once
# and shared by the class's tests.
module RailsAppCases
  def self.included(base)
    base.extend(ClassMethods)
  end

  module ClassMethods
    # A boot that failed fails every test at once, without booting again.
    def server
      raise @boot_error if @boot_error

      @server ||= start_server.stop_after_run
    rescue StandardError => e
      @boot_error = e
      raise
    end
  end

  def server
    self.class.server
  end

  def http
    Net::HTTP.start(server.host, server.port, open_timeout: 5, read_timeout: 30) { |h| yield h }
  end

  # GET / : the session cookie and a CSRF token: the form's own (Rails
  # makes one per form action) or, meta: true, the page's csrf-token, which
  # is good for any action.
  def form_token_and_cookie(meta: false)
    page = http { |h| h.get("/") }
    assert_equal "200", page.code
    pattern = meta ? /name="csrf-token" content="([^"]+)"/ : /name="authenticity_token" value="([^"]+)"/
    token = page.body[pattern, 1]
    cookie = page["set-cookie"][/\A_sample_app_session=[^;]+/]
    assert token && cookie, "no token or cookie in #{page.body[0, 500]}"
    [token, cookie]
  end

  def post_form(path, fields, cookie)
    http do |h|
      h.post(path, URI.encode_www_form(fields),
             "content-type" => "application/x-www-form-urlencoded", "cookie" => cookie)
    end
  end

  def test_form_post_with_the_csrf_token_succeeds_and_without_it_is_refused
    token, cookie = form_token_and_cookie
    saved = post_form("/messages", { "authenticity_token" => token, "message[body]" => "hello narwhal" }, cookie)
    assert_equal "200", saved.code, saved.body[0, 500]
    assert_equal "saved: hello narwhal\n", saved.body

    refused = post_form("/messages", { "message[body]" => "forged" }, cookie)
    assert_equal "422", refused.code
    refute_includes refused.body, "saved:"
  end

  def test_json_post_sent_chunked_reaches_the_app_whole
    json = JSON.generate(item: { name: "narwhal", tusks: 1, note: "x" * 3000 })
    chunks = [json[0, 10], json[10, 2000], json[2010..]]
    client = server.connect
    client.write("POST /echo HTTP/1.1\r\nHost: #{server.host}\r\nContent-Type: application/json\r\n" \
                 "Transfer-Encoding: chunked\r\n\r\n")
    chunks.each { |chunk| client.write("#{chunk.bytesize.to_s(16)}\r\n#{chunk}\r\n") }
    client.write("0\r\n\r\n")
    response = client.read_response(timeout: 30)
    assert_equal 200, response.status, response.body[0, 500]
    echoed = JSON.parse(response.body)
    assert_equal({ "name" => "narwhal", "tusks" => 1, "note" => "x" * 3000 }, echoed["item"])
    assert_equal json.bytesize, echoed["raw_post_bytes"]
    # the body is read whole before the app runs: the env gives its decoded
    # length, as for a Content-Length body, and no Transfer-Encoding
    assert_equal json.bytesize.to_s, echoed["env_content_length"]
    assert_nil echoed["env_transfer_encoding"]
  ensure
    client&.close
  end

  def test_head_sends_get_s_headers_and_no_body
    client = server.connect
    client.write("GET / HTTP/1.1\r\nHost: #{server.host}\r\n\r\n")
    get = client.read_response(timeout: 30)
    client.write("HEAD / HTTP/1.1\r\nHost: #{server.host}\r\n\r\n")
    head = client.read_response(head: true, timeout: 30)
    assert_equal 200, head.status
    assert_equal get["content-type"], head["content-type"]
    # RFC 9110 8.6: Content-Length in a HEAD response only if it is GET's
    assert_includes [nil, get["content-length"]], head["content-length"]
    # no body bytes: the next response on the connection starts cleanly
    client.write("GET /up HTTP/1.1\r\nHost: #{server.host}\r\n\r\n")
    assert_equal "HTTP/1.1 200 OK", client.read_response(timeout: 30).status_line
  ensure
    client&.close
  end

  def test_multipart_upload
    token, cookie = form_token_and_cookie(meta: true)
    file = Random.new(42).bytes(300 * 1024) # beyond client_body_buffer_size: spooled to a file
    boundary = "narwhal#{SecureRandom.hex(8)}"
    parts = { "authenticity_token" => token, "note" => "tusk scan" }.map do |name, value|
      "--#{boundary}\r\nContent-Disposition: form-data; name=\"#{name}\"\r\n\r\n#{value}\r\n"
    end
    body = parts.join.b + "--#{boundary}\r\nContent-Disposition: form-data; name=\"file\"; " \
                          "filename=\"scan.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n".b +
           file + "\r\n--#{boundary}--\r\n".b
    response = http do |h|
      h.post("/uploads", body, "content-type" => "multipart/form-data; boundary=#{boundary}", "cookie" => cookie)
    end
    assert_equal "200", response.code, response.body[0, 500]
    assert_equal({ "filename" => "scan.bin", "content_type" => "application/octet-stream", "size" => file.bytesize,
                   "sha256" => Digest::SHA256.hexdigest(file), "note" => "tusk scan" }, JSON.parse(response.body))
  end

  def test_action_cable_websocket_handshake_and_welcome
    key = Base64.strict_encode64(SecureRandom.bytes(16))
    origin = "http://#{server.host}:#{server.port}"
    client = server.connect
    client.write("GET /cable HTTP/1.1\r\nHost: #{server.host}:#{server.port}\r\nUpgrade: websocket\r\n" \
                 "Connection: Upgrade\r\nSec-WebSocket-Key: #{key}\r\nSec-WebSocket-Version: 13\r\n" \
                 "Sec-WebSocket-Protocol: actioncable-v1-json\r\nOrigin: #{origin}\r\n\r\n")
    response = client.read_response(timeout: 30)
    assert_equal 101, response.status, response.raw.inspect
    assert_equal "websocket", response["upgrade"].downcase
    accept = Base64.strict_encode64(Digest::SHA1.digest("#{key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
    assert_equal accept, response["sec-websocket-accept"]
    # Action Cable's first message, in an unmasked text frame
    opcode, length = client.read_bytes(2, 30).bytes
    assert_equal 0x81, opcode
    assert_equal({ "type" => "welcome" }, JSON.parse(client.read_bytes(length & 0x7f, 30)))
  ensure
    client&.close
  end
end
