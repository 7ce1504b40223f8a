# frozen_string_literal: true

require "logger"
require "socket"
require "stringio"
require "minitest/mock"
require_relative "fake_counters"

module Narwhal
  # A Connection over a socket pair, as the connection tests drive it: what
  # the dispatcher is handed, what the client reads back, and what the
  # reactor is told to do. Include it in a Minitest::Test.
  module ConnectionHarness
    Limits = Narwhal::Server::Limits
    LIMITS = Limits.new(body_buffer_size: 1024, max_body_size: 10_000, max_request_line: 1024,
                        max_header_size: 4096, max_header_fields: 50, keepalive_timeout: 5,
                        keepalive_requests: 100, client_header_timeout: 10, client_body_timeout: 3,
                        write_timeout: 5).freeze
    TEMPLATE = { "rack.input" => Narwhal::Request::NullInput::INSTANCE, "SCRIPT_NAME" => "" }.freeze
    BIG = 4 * 1024 * 1024 # more than a socket pair buffers

    # Records each request as the app would see it; answers with outcome.
    class FakeDispatcher
      attr_reader :seen
      attr_accessor :outcome, :on_dispatch, :request_loop

      def initialize
        @seen = []
        @outcome = Narwhal::Responder::KEEP
        @request_loop = nil # every request comes here, through Connection's Ruby path
      end

      def dispatch(request)
        env = request.env
        body = env["rack.input"]&.read
        @seen << { method: env["REQUEST_METHOD"], path: env["PATH_INFO"], body: body, flags: request.flags,
                   remote: env["REMOTE_ADDR"] }
        on_dispatch&.call(request)
        # as the Responder: a response whose head says close ends the connection
        keep = request.flags & Narwhal::Request::KEEPALIVE != 0
        @outcome == Narwhal::Responder::KEEP && !keep ? Narwhal::Responder::CLOSE : @outcome
      end
    end

    def setup
      @server, @client = UNIXSocket.pair
      @dispatcher = FakeDispatcher.new
      @counters = FakeCounters.new
      @log = StringIO.new
      @conn = new_connection
    end

    def teardown
      @server.close unless @server.closed?
      @client.close unless @client.closed?
    end

    def new_connection(stopping: false)
      @context = Narwhal::Connection::Context.new(LIMITS, @dispatcher, Logger.new(@log), @counters, stopping)
      out = Narwhal::SocketWriter.new(@server, 5)
      @request = Narwhal::Request.new(TEMPLATE, out, "10.0.0.1", false, @context) # as Connection::Factory makes it
      Narwhal::Connection.new(@server, @request, @context)
    end

    # Runs the block with Clock.now reading @now (set it to move time).
    def with_clock(start, &block)
      @now = start
      Narwhal::Clock.stub(:now, -> { @now }, &block)
    end

    def send_bytes(bytes)
      @client.write(bytes)
      @conn.on_readable
    end

    def reply
      @client.read_nonblock(65_536, exception: false).then { |r| r == :wait_readable ? "" : r.to_s }
    end

    # The connection with a writer that spools, as a worker's are; the app
    # answers /big with more than the socket takes.
    def spooling(keepalive: true)
      @budget = Narwhal::SocketWriter::SpoolBudget.new(64 * 1024 * 1024, 64 * 1024, disk_reserve: 0)
      context = Narwhal::Connection::Context.new(LIMITS, @dispatcher, Logger.new(@log), @counters, !keepalive)
      @request = Narwhal::Request.new(TEMPLATE, Narwhal::SocketWriter.new(@server, 5, @budget), "10.0.0.1", false, context)
      @conn = Narwhal::Connection.new(@server, @request, context)
      @dispatcher.on_dispatch = ->(request) { request.out.write("a" * BIG) if request.env["PATH_INFO"] == "/big" }
    end

    # The reactor's part while the client reads: on_writable until it is
    # done; returns its last answer and the bytes read.
    def send_rest
      got = +""
      action = :write
      while action == :write
        got << reply
        action = @conn.on_writable
      end
      got << reply while @client.wait_readable(0)
      [action, got]
    end

    # What the client has not read of earlier responses: the socket takes
    # nothing more (pipelined requests whose answers it never reads).
    def fill_socket
      filler = "f" * 65_536
      filled = 0
      while (n = @server.write_nonblock(filler, exception: false)) != :wait_writable
        filled += n
      end
      filled
    end

    def timed
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      result = yield
      [result, Process.clock_gettime(Process::CLOCK_MONOTONIC) - started]
    end
  end
end
