# frozen_string_literal: true

require "socket"

module Narwhal
  module Dispatcher
    # The line along which the workers of one master pass kept-alive
    # connections (keepalive_release): a SOCK_SEQPACKET socket pair the
    # master makes before it forks, each message one connection's socket
    # (SCM_RIGHTS) with the listener it came from and its request count. A
    # saturated worker gives its idle connections to it (#give); a worker
    # with an idle thread takes them from it (Inbox, one more listener to
    # the reactor, so that the kernel wakes one waiting worker per message,
    # as for a new connection). Nothing is closed on the way, so unlike a
    # server's close of an idle connection no request can race it: one
    # already sent waits in the socket and is read by the taker. The master
    # holds both ends, so a connection given while no worker takes is kept
    # until one does. The line holds a few messages (the kernel's
    # net.unix.max_dgram_qlen, 10 by default): a give that does not fit
    # keeps the connection where it is.
    class HandOff
      autoload :Inbox, "narwhal/dispatcher/hand_off/inbox"
      autoload :Release, "narwhal/dispatcher/hand_off/release"

      # A connection taken from the line: its socket, the index of its
      # listener (#origin) and how many requests it has had. Acceptors see
      # an accepted socket (#fileno, #close).
      Taken = Struct.new(:io, :origin, :requests) do
        def fileno
          io.fileno
        end

        def close
          io.close
        end
      end

      FORMAT = "L2" # origin, requests
      MESSAGE_BYTES = 8
      CONTROL_BYTES = 64 # one descriptor's SCM_RIGHTS, with room to spare

      # Made by the master, before any worker.
      def self.open
        new(*UNIXSocket.pair(:SEQPACKET))
      end

      # listeners: those every worker of the master shares (not one that
      # after_fork added with server.listen): only their connections move.
      def initialize(out, inbox, listeners = [].freeze)
        @out = out
        @inbox = inbox
        @listeners = listeners
      end

      # In a worker before after_fork: the same line, with the listeners
      # every sibling has.
      def among(listeners)
        self.class.new(@out, @inbox, listeners.dup.freeze)
      end

      # The index of a shared listener, nil for one only this worker has.
      def origin(listener)
        @listeners.index { |l| l.equal?(listener) }
      end

      # The end siblings take from.
      def inbox_io
        @inbox
      end

      # Puts io's connection on the line; false when the line is full (the
      # caller keeps it). The caller then closes its own descriptor: the
      # message holds the connection.
      def give(io, origin, requests)
        rights = Socket::AncillaryData.unix_rights(io)
        @out.sendmsg_nonblock([origin, requests].pack(FORMAT), 0, nil, rights, exception: false) != :wait_writable
      end

      # A Taken, or :wait_readable. A message whose descriptor could not
      # be received (the process is out of them: the kernel drops it, and
      # the connection closes with its last descriptor) is skipped.
      def take
        loop do
          got = @inbox.recvmsg_nonblock(MESSAGE_BYTES, 0, CONTROL_BYTES, scm_rights: true, exception: false)
          return got if got == :wait_readable

          message, _addr, _flags, control = got
          io = control&.unix_rights&.first or next
          origin, requests = message.unpack(FORMAT)
          return Taken.new(io, origin, requests)
        end
      end
    end
  end
end
