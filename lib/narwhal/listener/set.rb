# frozen_string_literal: true

module Narwhal
  class Listener
    # The listen sockets of one server (a master and its workers, or a
    # standalone serving process): the configured addresses, bound here or
    # inherited from a parent (USR2's NARWHAL_FD, Unicorn's UNICORN_FD,
    # systemd's LISTEN_FDS), and the default address when neither the config
    # nor a parent gave any. It owns them: `close` closes them all.
    class Set
      include Enumerable

      FD_ENV = "NARWHAL_FD"
      # read once, then removed: programs the app runs must not take them
      INHERIT_ENV = [FD_ENV, "UNICORN_FD", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"].freeze
      SYSTEMD_FIRST_FD = 3 # sd_listen_fds(3)

      # env: where the inherited descriptors are named (ENV; a Hash in tests)
      def initialize(logger, env: ENV)
        @logger = logger
        @env = env
        @listeners = []
      end

      def each(&block)
        @listeners.each(&block)
      end

      # addresses: the configured [[address, options], ...]. Inherited sockets
      # the config names are kept (no gap in accepting), the others closed;
      # with no address configured every inherited socket is kept, and
      # `default` is bound only when nothing was inherited either. Raises
      # (Error) with everything taken so far closed.
      def open(addresses, default:)
        inherited = inherit
        addresses = [[default, {}]] if addresses.empty? && inherited.empty?
        addresses.each do |address, options|
          wanted = Listener.expand_addr(address)
          kept = inherited.find { |listener| listener.address == wanted }
          kept ? keep(inherited.delete(kept)) : listen(address, options)
        end
        addresses.empty? ? inherited.each { |listener| keep(listener) } : close_unnamed(inherited)
        self
      rescue StandardError
        inherited&.each { |listener| listener.close(unlink: false) }
        close
        raise
      end

      # Binds one more address (Unicorn's `server.listen`, also from
      # after_fork for a worker's own port).
      def listen(address, options = {})
        listener = Listener.new(address.to_s, options, @logger)
        @listeners << listener
        Banner.log(@logger, "listening on", listener)
        listener
      end

      # In USR2's child, just before exec: the descriptors stay open across
      # it and NARWHAL_FD names them. Returns exec's redirection map.
      def pass_on_exec
        fds = @listeners.map { |listener| listener.io.fileno }
        @env[FD_ENV] = fds.join(",")
        @listeners.each { |listener| listener.io.close_on_exec = false }
        fds.to_h { |fd| [fd, fd] }
      end

      # unlink: false keeps the Unix socket files (a re-exec'd master still
      # serves them).
      def close(unlink: true)
        @listeners.each { |listener| listener.close(unlink: unlink) }
        @listeners.clear
      end

      private

      def inherit
        fds = (@env[FD_ENV] || @env["UNICORN_FD"]).to_s.split(",").map { |fd| Integer(fd, 10) }
        if @env["LISTEN_PID"].to_i == Process.pid
          fds.concat((SYSTEMD_FIRST_FD...(SYSTEMD_FIRST_FD + @env["LISTEN_FDS"].to_i)).to_a)
        end
        INHERIT_ENV.each { |name| @env.delete(name) }
        fds.uniq.map { |fd| Listener.inherit(fd) }
      end

      def keep(listener)
        @listeners << listener
        Banner.log(@logger, "inherited", listener)
      end

      def close_unnamed(inherited)
        inherited.each do |listener|
          @logger.info("closing inherited addr=#{listener.address}: not in the configuration")
          listener.close(unlink: false)
        end
      end
    end
  end
end
