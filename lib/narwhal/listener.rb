# frozen_string_literal: true

require "socket"

module Narwhal
  # One bound listen socket (TCP or Unix) and the env defaults that requests
  # accepted on it start from.
  class Listener
    DEFAULT_BACKLOG = 1024
    UNIX_REMOTE_ADDR = "127.0.0.1"

    attr_reader :io, :address

    # "host:port", ":port", "port", "[::1]:port", "/path/to.sock", "unix:/path"
    def self.parse(address)
      addr = address.to_s.strip
      return [:unix, addr.delete_prefix("unix:")] if addr.start_with?("unix:", "/", "./", "~")

      case addr
      when /\A\[([^\]]+)\]:(\d+)\z/ then [:tcp, Regexp.last_match(1), Integer(Regexp.last_match(2), 10)]
      when /\A(\d+)\z/ then [:tcp, "0.0.0.0", Integer(Regexp.last_match(1), 10)]
      when /\A:(\d+)\z/ then [:tcp, "0.0.0.0", Integer(Regexp.last_match(1), 10)]
      when /\A([^:\[\]]+):(\d+)\z/ then [:tcp, Regexp.last_match(1), Integer(Regexp.last_match(2), 10)]
      else raise ArgumentError, "invalid listen address #{address.inspect}"
      end
    end

    def initialize(address, options = {})
      @kind, host_or_path, port = self.class.parse(address)
      backlog = options.fetch(:backlog, DEFAULT_BACKLOG)
      @io = @kind == :unix ? bind_unix(File.expand_path(host_or_path)) : bind_tcp(host_or_path, port)
      @io.listen(backlog)
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

      Socket.unpack_sockaddr_in(sock.getpeername)[1]
    rescue SystemCallError, ArgumentError
      UNIX_REMOTE_ADDR
    end

    def accept_nonblock
      @io.accept_nonblock(exception: false)
    end

    def close
      path = unix? ? @io.path : nil
      @io.close unless @io.closed?
      File.unlink(path) if path && File.socket?(path)
    rescue SystemCallError
      nil
    end

    private

    def describe
      return @io.path if unix?

      addr = @io.local_address
      addr.ipv6? ? "[#{addr.ip_address}]:#{addr.ip_port}" : "#{addr.ip_address}:#{addr.ip_port}"
    end

    def bind_tcp(host, port)
      sock = TCPServer.new(host, port)
      # accepted sockets inherit this: responses written in parts must not
      # wait for delayed ACKs
      sock.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1)
      sock
    end

    def bind_unix(path)
      remove_stale_socket(path)
      UNIXServer.new(path)
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
