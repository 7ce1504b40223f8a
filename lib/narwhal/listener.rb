# frozen_string_literal: true

require "socket"
require "io/nonblock"

module Narwhal
  # One listen socket (TCP or Unix), bound here or inherited from a parent
  # process, and the env defaults that requests accepted on it start from.
  class Listener
    autoload :Banner, "narwhal/listener/banner"
    autoload :Error, "narwhal/listener/error"
    autoload :Set, "narwhal/listener/set"

    DEFAULT_BACKLOG = 1024
    DEFAULT_TRIES = 5
    DEFAULT_DELAY = 0.5
    DEFAULT_DEFER_ACCEPT = 1 # seconds, as Unicorn
    UNIX_REMOTE_ADDR = "127.0.0.1"
    BOOLEAN_OPTIONS = %i[tcp_nodelay tcp_nopush ipv6only reuseport].freeze

    attr_reader :io, :address

    FORMS = "host:port, :port, port, [::1]:port, /path/to.sock, ./path/to.sock or unix:/path"
    MAX_PORT = 65_535

    # "host:port", ":port", "port", "[::1]:port", "/path/to.sock", "unix:/path"
    def self.parse(address)
      addr = address.to_s.strip
      return [:unix, addr.delete_prefix("unix:")] if addr.start_with?("unix:", "/", "./", "~")

      parsed = case addr
               when /\A\[([^\]]+)\]:(\d+)\z/ then [:tcp, Regexp.last_match(1), Integer(Regexp.last_match(2), 10)]
               when /\A:?(\d+)\z/ then [:tcp, "0.0.0.0", Integer(Regexp.last_match(1), 10)]
               when /\A([^:\[\]]+):(\d+)\z/ then [:tcp, Regexp.last_match(1), Integer(Regexp.last_match(2), 10)]
               else raise ArgumentError, "invalid listen address #{address.inspect} (use #{FORMS})"
               end
      # the kernel would take 99999 as 34463
      raise ArgumentError, "invalid listen address #{address.inspect}: port above #{MAX_PORT}" if parsed[2] > MAX_PORT

      parsed
    end

    # The canonical form of an address, as #address reports it, so that a
    # configured address can be matched with an inherited socket.
    def self.expand_addr(address)
      kind, host, port = parse(address)
      return File.expand_path(host) if kind == :unix

      host = Addrinfo.ip(host).ip_address if host !~ /\A[\d.:a-fA-F]+\z/
      host.include?(":") ? "[#{host}]:#{port}" : "#{host}:#{port}"
    rescue SocketError
      "#{host}:#{port}"
    end

    # nil when the listen options are valid, else what is wrong with them.
    def self.option_problem(options)
      options.each do |key, value|
        ok = case key
             when :backlog, :rcvbuf, :sndbuf then value.is_a?(Integer) && value.positive?
             when :umask then value.is_a?(Integer) && value >= 0
             when :tcp_defer_accept then [true, false, nil].include?(value) || (value.is_a?(Integer) && value >= 0)
             when :accept_filter then value.nil? || value.is_a?(String)
             when :tries then value.is_a?(Integer) && (value >= 0 || value == -1)
             when :delay then value.is_a?(Numeric) && value >= 0
             when *BOOLEAN_OPTIONS then [true, false].include?(value)
             else true
             end
        return "option #{key}: invalid value #{value.inspect}" unless ok
      end
      nil
    end

    # Wraps an inherited listening socket (NARWHAL_FD, UNICORN_FD, systemd).
    def self.inherit(fd)
      probe = Socket.for_fd(fd)
      probe.autoclose = false # only one IO may own the descriptor
      family = probe.local_address.afamily
      io = family == Socket::AF_UNIX ? UNIXServer.for_fd(fd) : TCPServer.for_fd(fd)
      # it came through an exec: without this every program a worker runs
      # would hold the listening socket (USR2 clears it again for its exec)
      io.close_on_exec = true
      allocate.tap { |listener| listener.send(:adopt, io) }
    end

    # Binds address, retrying EADDRINUSE `tries` times `delay` seconds apart
    # (tries -1: until it succeeds). Options as Unicorn's `listen`.
    def initialize(address, options = {}, logger = nil)
      @options = options
      @kind, host_or_path, port = self.class.parse(address)
      target = @kind == :unix ? File.expand_path(host_or_path) : [host_or_path, port]
      begin
        @io = with_retries(address, logger) { @kind == :unix ? bind_unix(target) : bind_tcp(*target) }
        @io.listen(options.fetch(:backlog, DEFAULT_BACKLOG))
      rescue SystemCallError, SocketError, ArgumentError => e
        @io&.close
        raise Error.from(e, @kind, target)
      end
      @address = describe
    end

    def unix?
      @kind == :unix
    end

    # The env entries every request on this listener starts with.
    def env_defaults
      if unix?
        { "SERVER_NAME" => "localhost", "SERVER_PORT" => "80" }
      else
        addr = @io.local_address
        { "SERVER_NAME" => addr.ip_address, "SERVER_PORT" => addr.ip_port.to_s }
      end
    end

    def remote_addr(sock)
      return UNIX_REMOTE_ADDR if unix?

      # nil: the peer is gone already (getpeername failed)
      Narwhal.peer_address(sock.fileno) || UNIX_REMOTE_ADDR
    end

    # What #accept_nonblock returns: the class of this listener's sockets.
    def socket_class
      unix? ? UNIXSocket : TCPSocket
    end

    def accept_nonblock
      @io.accept_nonblock(exception: false)
    end

    # unlink: false keeps a Unix socket's file, for a process that inherited
    # the socket and still serves it. Only a file this process bound is
    # removed: one inherited from systemd belongs to its socket unit.
    def close(unlink: true)
      path = unlink ? @bound_path : nil
      @io.close unless @io.closed?
      File.unlink(path) if path && File.socket?(path)
    rescue SystemCallError, IOError
      nil
    end

    private

    def adopt(io)
      @options = {}
      @io = io
      # systemd's sockets come in blocking mode: the request loop's
      # accept4(2) must never wait (a worker woken with a sibling for one
      # connection would sit in accept, deaf to its signals)
      io.nonblock = true
      @kind = io.local_address.afamily == Socket::AF_UNIX ? :unix : :tcp
      @address = describe
    end

    def describe
      return File.expand_path(@io.path) if unix?

      addr = @io.local_address
      addr.ipv6? ? "[#{addr.ip_address}]:#{addr.ip_port}" : "#{addr.ip_address}:#{addr.ip_port}"
    end

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
