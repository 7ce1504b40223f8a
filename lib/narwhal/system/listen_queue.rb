# frozen_string_literal: true

require "socket"

module Narwhal
  module System
    # How many connections wait in a listen socket's accept queue, and how
    # many it may hold (its backlog), as the kernel counts them (Linux). The
    # connections a worker has not accepted yet: the queue climbs while every
    # worker is busy, and a full one drops new connections.
    #
    #   ListenQueue.new.depths([tcp_server, unix_server])  # => { io => [2, 1024], ... }
    #
    # TCP: getsockopt(TCP_INFO) on the listening socket, where the kernel
    # reports the accept queue in tcpi_unacked and the backlog in
    # tcpi_sacked. Unix sockets have no such option: sock_diag (the netlink
    # interface `ss -xl` reads) reports the same two numbers for them, found
    # by the socket's inode. An IO neither can read is left out.
    class ListenQueue
      TCP_LISTEN = 10 # the kernel's state number for a listening socket
      # struct tcp_info: 8 bytes of u8 fields, then u32 rto, ato, snd_mss,
      # rcv_mss, unacked, sacked
      TCP_INFO_QUEUE = "@24L2"

      NETLINK_SOCK_DIAG = 4
      SOCK_DIAG_BY_FAMILY = 20
      NLM_F_REQUEST = 0x1
      NLM_F_DUMP = 0x300
      NLMSG_ERROR = 2
      NLMSG_DONE = 3
      UDIAG_SHOW_RQLEN = 0x10
      UNIX_DIAG_RQLEN = 4
      NLMSG_HEADER = "LSSLL" # length, type, flags, sequence, port id
      NO_COOKIE = 0xffff_ffff

      # { io => [current, max] } for each IO that could be read.
      def depths(ios)
        unix, tcp = ios.partition { |io| io.local_address.unix? }
        found = tcp.to_h { |io| [io, tcp_depth(io)] }
        unless unix.empty?
          by_inode = unix_depths
          unix.each { |io| found[io] = by_inode[io.stat.ino] }
        end
        found.compact
      rescue SystemCallError, IOError, SocketError
        found&.compact || {}
      end

      # [current, max] of a listening TCP socket, nil when not one.
      def tcp_depth(io)
        data = io.getsockopt(Socket::IPPROTO_TCP, Socket::TCP_INFO).data
        return nil unless data.getbyte(0) == TCP_LISTEN

        data.unpack(TCP_INFO_QUEUE)
      rescue SystemCallError, IOError, SocketError, ArgumentError
        nil
      end

      # { inode => [current, max] } of every listening Unix socket in this
      # network namespace (one netlink dump).
      def unix_depths
        sock = Socket.new(Socket::AF_NETLINK, Socket::SOCK_DGRAM, NETLINK_SOCK_DIAG)
        sock.send(unix_dump_request, 0)
        found = {}
        nil until read_replies(sock, found) == :done
        found
      rescue SystemCallError, IOError, SocketError, ArgumentError
        {}
      ensure
        sock&.close
      end

      private

      # struct unix_diag_req: family, protocol, pad, states, ino, show, cookie
      def unix_dump_request
        request = [Socket::AF_UNIX, 0, 0, 1 << TCP_LISTEN, 0, UDIAG_SHOW_RQLEN, NO_COOKIE, NO_COOKIE].pack("CCSL5")
        [16 + request.bytesize, SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, 1, 0].pack(NLMSG_HEADER) + request
      end

      # Reads one datagram of replies into found; :done at the dump's end.
      def read_replies(sock, found)
        data = sock.recv(65_536)
        raise IOError, "sock_diag closed" if data.empty?

        offset = 0
        while offset + 16 <= data.bytesize
          length, type = data.unpack("@#{offset}LS")
          return :done if type == NLMSG_DONE
          raise IOError, "sock_diag error" if type == NLMSG_ERROR || length < 16

          parse_unix_message(data.byteslice(offset + 16, length - 16), found)
          offset += (length + 3) & ~3
        end
        nil
      end

      # struct unix_diag_msg (family, type, state, pad, ino, cookie[2]), then
      # attributes: UNIX_DIAG_RQLEN holds the queue and the backlog.
      def parse_unix_message(msg, found)
        inode = msg.unpack1("@4L")
        offset = 16
        while offset + 4 <= msg.bytesize
          length, type = msg.unpack("@#{offset}SS")
          break if length < 4

          found[inode] = msg.unpack("@#{offset + 4}L2") if type == UNIX_DIAG_RQLEN
          offset += (length + 3) & ~3
        end
      end
    end
  end
end
