# frozen_string_literal: true

require "logger"
require "socket"
require "stringio"

module Narwhal
  # A control listener on a loopback port, its status the test's @status,
  # and clients of it over real sockets. Include it in a Minitest::Test
  # that sets @status before calling super in setup (or defines status).
  module ControlListenerClient
    def setup
      @log = StringIO.new
      @control = Narwhal::Master::Control.new("127.0.0.1:0", status, Logger.new(@log), read_deadline: 0.5).start
      @sockets = []
    end

    def teardown
      @sockets.each(&:close)
      @control.stop
    end

    def connect
      sock = TCPSocket.new("127.0.0.1", Integer(@control.address.split(":").last))
      @sockets << sock
      Narwhal::RawClient.new(sock)
    end

    def get(path, method: "GET")
      client = connect.write("#{method} #{path} HTTP/1.1\r\nhost: x\r\n\r\n")
      client.read_response(head: method == "HEAD")
    end
  end
end
