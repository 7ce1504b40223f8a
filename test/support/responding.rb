# frozen_string_literal: true

require "logger"
require "socket"
require "stringio"
require_relative "fake_counters"

module Narwhal
  # Real Responders and Requests over a socket pair, for the dispatcher
  # tests: what the client reads is what the app answered. Include it in a
  # Minitest::Test.
  module Responding
    def setup
      @server, @client = UNIXSocket.pair
      @log = StringIO.new
      @board = Scoreboard.new(1, threads: 2)
    end

    def teardown
      @server.close unless @server.closed?
      @client.close unless @client.closed?
    end

    # A Responder whose app answers with text; thread: its scoreboard sub-slot.
    def responder(text, thread: 0, access_log: nil)
      app = ->(env) { [200, { "content-type" => "text/plain" }, ["#{text} #{env['PATH_INFO']}"]] }
      Responder.new(app, Logger.new(@log), @board.thread_slot(0, thread), FakeCounters.new, access_log: access_log)
    end

    # A complete GET on the socket pair's writer.
    def request(path = "/", keepalive: true)
      request = Request.new({ "SCRIPT_NAME" => "" }, SocketWriter.new(@server, 5), "127.0.0.1")
      env = request.start
      env["REQUEST_METHOD"] = "GET"
      env["PATH_INFO"] = path
      request.complete(nil, true, keepalive)
      request
    end

    def body_received
      @client.read_nonblock(65_536, exception: false).then { |r| r.is_a?(String) ? r.split("\r\n\r\n", 2).last : nil }
    end
  end
end
