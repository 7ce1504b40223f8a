# frozen_string_literal: true

require "delegate"
require "logger"
require "socket"
require "stringio"

module Narwhal
  # A Reactor over a real loopback listener with fake handlers, as the
  # reactor tests drive it: handlers answer from scripts and record what
  # the reactor did to them. Include it in a Minitest::Test.
  module ReactorHarness
    # Answers each callback from a script; records what happened to it.
    class FakeHandler
      attr_reader :calls, :io
      attr_accessor :deadline, :idle, :answers

      def initialize(io, answers: [], deadline: Narwhal::Clock.now + 60, idle: false)
        @io = io
        @answers = answers
        @deadline = deadline
        @idle = idle
        @calls = []
      end

      def on_readable
        @calls << :readable
        @io.read_nonblock(1024, exception: false)
        answer = @answers.shift || :keep
        raise answer if answer.is_a?(Exception)

        answer
      end

      def on_timeout
        @calls << :timeout
        @deadline = Narwhal::Clock.now + 60
        @answers.shift || :close
      end

      def idle?
        @idle
      end

      def silent?
        false
      end

      def close
        @calls << :close
        @io.close
      end
    end

    # A listener as the reactor sees one.
    class FakeListener
      attr_reader :io

      def initialize(io)
        @io = io
      end

      def accept_nonblock
        @io.accept_nonblock(exception: false)
      end
    end

    # A Connection::Factory whose loop accepts: its first accept(2) fails
    # for want of descriptors, then it serves each connection and closes it.
    class ServingFactory
      def initialize(server)
        @server = server
        @tries = 0
      end

      def call(_sock)
        raise "accepted in Ruby"
      end

      def accept_served
        raise Errno::EMFILE if (@tries += 1) == 1

        sock = @server.accept_nonblock(exception: false)
        return nil if sock == :wait_readable

        sock.write("served")
        sock.close
        false
      end
    end

    def setup
      @log = StringIO.new
      @reactor = Narwhal::Reactor.new(Logger.new(@log))
      @server = TCPServer.new("127.0.0.1", 0)
      @listener = FakeListener.new(@server)
      @handlers = []
      @clients = []
    end

    def teardown
      @clients.each { |c| c.close unless c.closed? }
      @server.close unless @server.closed?
    end

    # Handlers for accepted sockets answer with the scripts given in order.
    def accept_with(*scripts, **options)
      @reactor.add_listener(@listener) do |sock|
        FakeHandler.new(sock, answers: scripts.shift || [], **options).tap { |h| @handlers << h }
      end
    end

    def connect(bytes = nil)
      client = TCPSocket.new("127.0.0.1", @server.addr[1])
      client.write(bytes) if bytes
      @clients << client
      client
    end

    # Runs the loop in a thread for the block, then stops it.
    def running
      thread = Thread.new { @reactor.run }
      yield
    ensure
      @reactor.close_all
      thread&.join(5)
    end

    def wait_for(message, timeout: 10)
      deadline = Narwhal::Clock.now + timeout
      sleep 0.01 until yield || Narwhal::Clock.now > deadline
      assert yield, message
    end

    def run_until(message, &condition)
      running { wait_for(message, &condition) }
    end

    # Asks to WRITE without reading what came; then answers on_writable from
    # its own script; reads (and closes) once it is read again.
    class WritingHandler < FakeHandler
      attr_accessor :writes, :fill

      def on_readable
        return super unless @calls.empty?

        @calls << :readable # the bytes stay unread: only WRITE keeps them from being read again
        true while @fill && @io.write_nonblock("x" * 65_536, exception: false) != :wait_writable
        :write
      end

      def on_writable
        @calls << :writable
        @writes.shift || :keep
      end
    end

    def accept_writing(writes, fill: false, **options)
      @reactor.add_listener(@listener) do |sock|
        WritingHandler.new(sock, answers: %i[close], **options).tap do |h|
          h.writes = writes.dup
          h.fill = fill
          @handlers << h
        end
      end
    end

    # A gate that always lets the reactor accept (request threads' mode).
    class OpenGate
      attr_reader :seen

      def initialize
        @seen = []
      end

      def open?(_now, _starting = 0) = true
      def alone? = true
      def recheck_in = nil
      def listening(_on); end
      def siblings? = false
      def crowd_welcome? = true
      def crowd_room(_held) = Narwhal::Reactor::Acceptors::CROWD_MAX
      def holding(_count); end

      def accepted(handler, _now)
        @seen << handler
      end
    end

    # A handler whose reads wait for the test to let them go, and that says
    # on which thread and how many at once they ran.
    class GatedHandler < FakeHandler
      attr_reader :threads, :most_at_once

      def initialize(io, gate)
        super(io)
        @gate = gate
        @threads = []
        @at_once = 0
        @most_at_once = 0
        @lock = Mutex.new
      end

      def on_readable
        @lock.synchronize { @most_at_once = [@most_at_once, @at_once += 1].max }
        @threads << Thread.current.name
        answer = super
        @gate.pop # the bytes are read: more come while this thread still has the handler
        answer
      ensure
        @lock.synchronize { @at_once -= 1 }
      end

      def awaiting_first_request? = false
    end

    # Runs the loop with request threads for the block, then stops it.
    def running_threads(count)
      thread = Thread.new { @reactor.run(threads: count) { |i| Thread.current[:index] = i } }
      yield
    ensure
      @reactor.close_all
      thread&.join(5)
    end

    # A gate whose sibling holds fewer connections: a crowded worker's share
    # of a crowd is none (crowd_room 0) until the test gives it room.
    class NoRoomGate < OpenGate
      attr_accessor :room
      attr_reader :listenings

      def initialize
        super
        @room = 0
        @listenings = []
      end

      def crowd_room(_held) = @room
      def listening(on) = @listenings << on
    end

    # The reactor's Poller, which refuses to register the next accepted
    # socket once with error (epoll_ctl: ENOMEM, or ENOSPC past
    # fs.epoll.max_user_watches). A connection served at once joins the set
    # when it first waits (#modify); one taken to be served later, at once
    # (#add).
    class RefusingPoller < SimpleDelegator
      def initialize(poller, error, listener_fd)
        super(poller)
        @error = error
        @listener_fd = listener_fd
      end

      def add(fd, events)
        refuse(fd)
        __getobj__.add(fd, events)
      end

      def modify(fd, events)
        refuse(fd)
        __getobj__.modify(fd, events)
      end

      private

      def refuse(fd)
        return unless @error && fd != @listener_fd

        error = @error
        @error = nil
        raise error
      end
    end
  end
end
