# frozen_string_literal: true

require "socket"

module Narwhal
  class Master
    class Control
      # The control thread's listening sockets, `control_listen`'s and
      # `agent_listen`'s (Agent): binding them, binding again later an
      # address another process still holds, closing them, and letting go
      # of them in a forked worker. Part of Control (its state is the
      # thread's).
      module Sockets
        # Binds the configured sockets not bound (nor passed down) yet. A
        # busy address raises Listener::Error, unless wait_if_busy (a
        # re-exec'd master, whose old master still holds it): then the
        # thread tries again every RETRY_BUSY seconds, serving the other
        # socket meanwhile. quiet: the failure was logged already.
        def bind_sockets(wait_if_busy: false, quiet: false)
          unbound.each do |name, bind|
            bind.call
          rescue Listener::Error => e
            raise unless wait_if_busy && e.cause.is_a?(Errno::EADDRINUSE)

            @logger.info("#{name}: #{e.message}; binding once it is free") unless quiet
          end
          @retry_bind_at = unbound.empty? ? nil : Clock.now + RETRY_BUSY
        end

        # In a forked worker: the thread is gone, the descriptors go too (a
        # worker holding a control connection would keep its client
        # waiting). The fork may have caught the thread between an accept
        # and noting the connection: any other socket on a control address
        # is pointed at /dev/null (not closed: its IO object, stranded with
        # the thread, still owns the descriptor number).
        def close_in_child
          locals = [@listener&.io&.local_address&.inspect_sockaddr, @agent&.local_address].compact
          @clients.each_key { |io| io.close unless io.closed? }
          @clients.clear
          @listener.io.close if @listener && !@listener.io.closed?
          @agent&.close_in_child
          [@wake_r, @wake_w].each { |io| io.close unless io.closed? }
          stray_sockets(locals).each { |io| io.reopen(File::NULL) } unless locals.empty?
        end

        private

        # [name, how to bind] of each socket still to bind.
        def unbound
          list = []
          list << ["control listener", method(:bind)] if @address && !@listener
          list << ["agent listener", @agent.method(:bind)] if @agent && !@agent.bound?
          list
        end

        def bind
          @listener = Listener.new(@address, LISTEN_OPTIONS.dup, @logger)
          @logger.info("control listener on #{address} (/metrics /health /ready /status)")
        end

        # What the thread accepts on (and the agent's succession pipe).
        def listening
          [@listener&.io, *@agent&.readers].compact
        end

        def close_sockets(unlink:)
          @listener&.close(unlink: unlink)
          @agent&.close(unlink: unlink)
        end

        def stray_sockets(locals)
          Dir.children("/proc/self/fd").filter_map do |fd|
            next unless File.readlink("/proc/self/fd/#{fd}").start_with?("socket:")

            io = Socket.for_fd(Integer(fd))
            io.autoclose = false
            io if locals.include?(io.local_address.inspect_sockaddr)
          rescue SystemCallError, IOError, SocketError, ArgumentError
            nil
          end
        end
      end
    end
  end
end
