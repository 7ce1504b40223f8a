# frozen_string_literal: true

require "socket"

module Narwhal
  # The test's own NOTIFY_SOCKET: a datagram socket bound in a temporary
  # directory, as systemd's is, that records each message with the pid of
  # the process that sent it (SO_PASSCRED). A ping's time is when the
  # kernel received it (SO_TIMESTAMP), not when the test got round to
  # reading it: pings read together are still as far apart as they came.
  class NotifySocket
    Message = Struct.new(:pid, :text) do
      def fields
        text.lines(chomp: true).to_h { |l| l.split("=", 2) }
      end
    end

    attr_reader :path

    def initialize(path)
      @path = path
      @socket = Socket.new(:UNIX, :DGRAM)
      @socket.bind(Socket.sockaddr_un(path))
      @socket.setsockopt(:SOCKET, :PASSCRED, true)
      @socket.setsockopt(:SOCKET, :TIMESTAMP, true)
      @pings = []
    end

    # WATCHDOG=1 alone, as [pid, arrival time in seconds] in arrival order.
    def pings
      drain(0)
      @pings
    end

    # The next message other than a lone WATCHDOG=1, waiting up to `timeout`.
    def next_message(timeout: 20)
      deadline = now + timeout
      loop do
        left = deadline - now
        raise Minitest::Assertion, "no notify message within #{timeout}s" if left <= 0

        message = receive(left)
        return message if message && message.text != "WATCHDOG=1"
      end
    end

    # Messages other than pings that are waiting now.
    def pending
      drain(0).reject { |m| m.text == "WATCHDOG=1" }
    end

    def close
      @socket.close
    end

    private

    def drain(timeout)
      messages = []
      while (message = receive(timeout))
        messages << message
        timeout = 0
      end
      messages
    end

    def receive(timeout)
      return nil unless @socket.wait_readable(timeout)

      text, _addr, _flags, *controls = @socket.recvmsg
      credentials = controls.find { |c| c.cmsg_is?(:SOCKET, :CREDENTIALS) }
      arrived = controls.find { |c| c.cmsg_is?(:SOCKET, :TIMESTAMP) }
      message = Message.new(credentials&.data&.unpack1("l"), text)
      @pings << [message.pid, arrived ? arrived.timestamp.to_f : Time.now.to_f] if text == "WATCHDOG=1"
      message
    end

    def now
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end
  end
end
