# frozen_string_literal: true

require "logger"
require "socket"
require "stringio"

module Narwhal
  # A ResponseWriter writing to a real SocketWriter over a socket pair:
  # what the client reads back. Include it in a Minitest::Test.
  module ResponsePair
    KEEP11 = ResponseHead::REQ_HTTP11 | ResponseHead::REQ_KEEPALIVE
    HEAD11 = KEEP11 | ResponseHead::REQ_HEAD

    def setup
      @server, @client = UNIXSocket.pair
      @log = StringIO.new
      @out = SocketWriter.new(@server, 5)
      @writer = ResponseWriter.new(Logger.new(@log), ResponseWriter.keep_alive_line(5))
    end

    def teardown
      @server.close unless @server.closed?
      @client.close unless @client.closed?
    end

    # Writes the response; returns [what #write returned, the bytes the
    # client reads, without the date line].
    def respond(status, headers, body, flags = KEEP11)
      result = @writer.write(@out, status, headers, body, flags)
      [result, received]
    end

    def received
      got = +""
      while (chunk = @client.read_nonblock(1 << 20, exception: false)).is_a?(String)
        got << chunk
      end
      got.sub(/^date: [^\r]*\r\n/, "")
    end

    # A body that only has #each (no to_ary, no to_path): its length is unknown.
    def each_body(*parts)
      Object.new.tap { |body| body.define_singleton_method(:each) { |&blk| parts.each(&blk) } }
    end
  end
end
