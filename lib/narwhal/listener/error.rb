# frozen_string_literal: true

module Narwhal
  class Listener
    # A listen address that could not be bound, said in the operator's terms:
    # "cannot listen on ADDRESS: what is wrong", naming what to change where
    # the cause is a common one. The system error stays as #cause.
    class Error < StandardError
      # Linux's default; the sysctl says where this machine draws the line
      PRIVILEGED_PORTS = 1024
      UNPRIVILEGED_PORT_START = "/proc/sys/net/ipv4/ip_unprivileged_port_start"
      # sun_path holds 108 bytes with the terminating NUL
      MAX_UNIX_PATH = 107

      attr_reader :address

      # kind, target: :tcp and [host, port], or :unix and the expanded path.
      def self.from(error, kind, target)
        address = kind == :unix ? target : tcp_address(*target)
        new(address, kind == :unix ? unix_reason(error, target) : tcp_reason(error, *target))
      end

      def self.tcp_address(host, port)
        host.include?(":") ? "[#{host}]:#{port}" : "#{host}:#{port}"
      end

      def self.tcp_reason(error, host, port)
        case error
        when Errno::EADDRINUSE
          owner = System::SocketOwner.describe(:tcp, port) || "another process (`ss -ltnp 'sport = :#{port}'` names it)"
          "address already in use by #{owner}"
        when Errno::EACCES
          first = first_unprivileged_port
          return "ports below #{first} need root or CAP_NET_BIND_SERVICE" if port < first

          ErrorMessage.strerror(error)
        when Errno::EADDRNOTAVAIL then "#{host} is not an address of this machine"
        when SocketError then resolve_reason(error, host)
        else ErrorMessage.for(error)
        end
      end

      # getaddrinfo's failure: a name that does not exist, or a resolver
      # that could not answer (which may pass).
      def self.resolve_reason(error, host)
        detail = error.message.delete_prefix("getaddrinfo: ")
        return "unknown host #{host}" if detail.match?(/not known|no address/i)

        "cannot resolve #{host}: #{detail.sub(/\A[A-Z](?=[a-z])/, &:downcase)}"
      end

      def self.first_unprivileged_port
        Integer(File.read(UNPRIVILEGED_PORT_START).strip, 10)
      rescue SystemCallError, ArgumentError
        PRIVILEGED_PORTS
      end

      def self.unix_reason(error, path)
        dir = File.dirname(path)
        case error
        when Errno::EADDRINUSE
          "already in use by #{System::SocketOwner.describe(:unix, path) || 'another server'}"
        when Errno::ENOENT, Errno::ENOTDIR
          File.directory?(dir) ? ErrorMessage.strerror(error) : "directory #{dir} does not exist"
        when Errno::EACCES then "permission denied: this user (uid #{Process.euid}) cannot create files in #{dir}"
        when ArgumentError
          return "a Unix socket path may be at most #{MAX_UNIX_PATH} bytes, this one is #{path.bytesize}" if
            path.bytesize > MAX_UNIX_PATH
          return "the file exists and is not a socket (only a stale socket file is replaced)" if
            File.exist?(path) && !File.socket?(path)

          error.message
        else ErrorMessage.for(error)
        end
      end

      def initialize(address, reason)
        @address = address
        super("cannot listen on #{address}: #{reason}")
      end
    end
  end
end
