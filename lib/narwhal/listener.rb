# frozen_string_literal: true

require "socket"
require "io/nonblock"

module Narwhal
  # One listen socket (TCP or Unix), bound here or inherited from a parent
  # process, and the env defaults that requests accepted on it start from.
  class Listener
    autoload :Banner, "narwhal/listener/banner"
    autoload :Bind, "narwhal/listener/bind"
    autoload :Error, "narwhal/listener/error"
    autoload :Set, "narwhal/listener/set"
    include Bind

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
        stamp_arrivals
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
      stamp_arrivals
      @address = describe
    end

    # Every connection accepted from a TCP listener inherits its receive
    # timestamps: the kernel's queue time (Arrival). Unix sockets have none.
    def stamp_arrivals
      Arrival.enable(@io.fileno) unless unix?
    end

    def describe
      return File.expand_path(@io.path) if unix?

      addr = @io.local_address
      addr.ipv6? ? "[#{addr.ip_address}]:#{addr.ip_port}" : "#{addr.ip_address}:#{addr.ip_port}"
    end

  end
end
