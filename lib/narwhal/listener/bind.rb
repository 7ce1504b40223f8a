# frozen_string_literal: true

module Narwhal
  class Listener
    # Binding a listener's socket: TCP with Unicorn's socket options
    # (tcp_defer_accept, tcp_nodelay, reuseport, ipv6only, buffers), Unix with
    # its umask or a private mode, a stale socket file replaced, EADDRINUSE
    # tried again `tries` times.
    module Bind
      private

      def with_retries(address, logger)
        tries = @options.fetch(:tries, DEFAULT_TRIES)
        delay = @options.fetch(:delay, DEFAULT_DELAY)
        attempt = 0
        begin
          yield
        rescue Errno::EADDRINUSE
          attempt += 1
          raise if tries != -1 && attempt > tries

          logger&.error("#{address} in use, retrying in #{delay}s (attempt #{attempt})")
          sleep(delay)
          retry
        end
      end

      def bind_tcp(host, port)
        addr = Addrinfo.tcp(host, port)
        sock = Socket.new(addr.afamily, Socket::SOCK_STREAM, 0)
        sock.setsockopt(Socket::SOL_SOCKET, Socket::SO_REUSEADDR, 1)
        sock.setsockopt(Socket::SOL_SOCKET, Socket::SO_REUSEPORT, 1) if @options[:reuseport]
        defer_accept(sock)
        if addr.ipv6? && @options.key?(:ipv6only)
          sock.setsockopt(Socket::IPPROTO_IPV6, Socket::IPV6_V6ONLY, @options[:ipv6only] ? 1 : 0)
        end
        apply_buffers(sock)
        # on by default: responses written in parts must not wait for delayed ACKs
        sock.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, @options.fetch(:tcp_nodelay, true) ? 1 : 0)
        sock.bind(addr)
        server = TCPServer.for_fd(sock.fileno)
        sock.autoclose = false
        server
      rescue StandardError
        sock&.close unless sock&.closed?
        raise
      end

      # Unicorn's tcp_defer_accept, on (1 s) unless false/nil/0: the kernel
      # hands over a connection only once its first bytes arrived, so a worker
      # woken for a connection has its request to read rather than a silent
      # socket to juggle (a burst of connects would otherwise be accepted
      # ahead of their requests). One still silent then is handed over anyway
      # (after about 1 s) and ends at client_header_timeout. accept_filter is
      # the FreeBSD equivalent and has no effect here.
      def defer_accept(sock)
        seconds = @options.fetch(:tcp_defer_accept, DEFAULT_DEFER_ACCEPT)
        seconds = 1 if seconds == true
        return unless seconds.is_a?(Integer) && seconds.positive? && Socket.const_defined?(:TCP_DEFER_ACCEPT)

        sock.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_DEFER_ACCEPT, seconds)
      end

      def apply_buffers(sock)
        sock.setsockopt(Socket::SOL_SOCKET, Socket::SO_RCVBUF, @options[:rcvbuf]) if @options[:rcvbuf]
        sock.setsockopt(Socket::SOL_SOCKET, Socket::SO_SNDBUF, @options[:sndbuf]) if @options[:sndbuf]
      end

      def bind_unix(path)
        remove_stale_socket(path)
        server = @options[:mode] ? bind_unix_private(path, @options[:mode]) : bind_unix_with_umask(path)
        @bound_path = path
        apply_buffers(server)
        server
      end

      def bind_unix_with_umask(path)
        old_umask = File.umask(@options.fetch(:umask, 0))
        UNIXServer.new(path)
      ensure
        File.umask(old_umask)
      end

      # mode: (the control listener's, not a `listen` option): the file is
      # created with at most these bits whatever the umask. Linux gives a
      # socket file the mode of the socket's inode (less the umask), so a
      # chmod before bind leaves no moment at which it is wider, and no
      # process-wide umask is changed under the master's other threads.
      def bind_unix_private(path, mode)
        sock = Socket.new(:UNIX, :STREAM)
        begin
          File.for_fd(sock.fileno, autoclose: false).chmod(mode)
          sock.bind(Socket.sockaddr_un(path))
        rescue StandardError
          sock.close
          raise
        end
        sock.autoclose = false # the UNIXServer owns the descriptor now
        UNIXServer.for_fd(sock.fileno)
      end

      # A socket file left by a dead server is replaced; a live one is an error.
      def remove_stale_socket(path)
        return unless File.exist?(path)
        raise ArgumentError, "#{path} exists and is not a socket" unless File.socket?(path)

        begin
          UNIXSocket.new(path).close
          raise Errno::EADDRINUSE, path
        rescue Errno::ECONNREFUSED, Errno::ENOENT
          File.unlink(path)
        end
      end
    end
  end
end
