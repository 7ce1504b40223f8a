# frozen_string_literal: true

module Narwhal
  class Master
    class Control
      # haproxy's agent-check (`agent_listen`): a socket of the master on
      # which each connection gets one line at once (Reply: `up ready 63%`,
      # `drain`, `down #booting`) and is closed. haproxy connects over TCP
      # (`agent-check agent-port N`); a Unix socket serves local scripts.
      #
      # The control listener's thread serves it (Control), with its
      # deadlines and client limit: the master's loop never waits for it,
      # and a client that connects and reads nothing is dropped at
      # WRITE_DEADLINE. What haproxy may send first (`agent-send`) is not
      # read: the line does not depend on it.
      #
      # USR2 passes the socket to the new master (Handover, ENV_NAME), so
      # that haproxy's check is never refused while the generations change;
      # Succession decides which of the two answers.
      class Agent
        autoload :Reply, "narwhal/master/control/agent/reply"
        autoload :Succession, "narwhal/master/control/agent/succession"

        ENV_NAME = "NARWHAL_AGENT_FD"

        # In a starting master: the agent for `address` (nil: none, and a
        # socket passed down is closed), with the socket and the succession
        # a USR2 predecessor passed down when the address is the same.
        def self.take(address, logger, env = ENV)
          listener = Handover.take(address, env, name: ENV_NAME)
          predecessor = Succession.take(env)
          unless listener
            predecessor&.close
            predecessor = nil
          end
          address && new(address, logger, listener: listener, predecessor: predecessor)
        end

        def initialize(address, logger, listener: nil, predecessor: nil)
          @address = address
          @logger = logger
          @listener = listener
          @inherited = !listener.nil?
          @succession = Succession.new(predecessor: predecessor)
        end

        # Whether its socket came from a USR2 predecessor.
        def inherited?
          @inherited
        end

        def bound?
          !@listener.nil?
        end

        # The bound address ("127.0.0.1:9395", a socket path), nil until bound.
        def address
          @listener&.address
        end

        # Raises Listener::Error (a busy address among them).
        def bind
          @listener = Listener.new(@address, LISTEN_OPTIONS.dup, @logger)
          @logger.info("agent listener on #{address} (haproxy agent-check)")
        end

        # What the control thread waits on: the socket, unless a USR2
        # successor answers on it now, and the succession's pipe.
        def readers
          [(@listener.io if @listener && !@succession.yielded?), @succession.reader].compact
        end

        # io: one of #readers, readable. Returns a connection to answer, or nil.
        def on_readable(io)
          if io == @succession.reader
            @logger.info("agent listener: the new master answers on #{address} now") if @succession.on_readable
            return nil
          end
          socket = @listener.io.accept_nonblock(exception: false)
          socket unless socket == :wait_readable
        end

        # The line for this moment; status: Status#to_h.
        def reply(status)
          Reply.line(status)
        end

        # The new master answers from now on (Succession#announce).
        def announce
          @succession.announce
        end

        # The USR2 successor died: this master answers again.
        def take_back
          @succession.take_back
        end

        # USR2's child, before exec: the socket and the succession's pipe.
        def pass_on_exec(env = ENV)
          return {} unless @listener

          Handover.pass_on_exec(@listener, env, name: ENV_NAME).merge(@succession.pass_on_exec(env))
        end

        # The socket's own address, to find a stray copy of it (Control#close_in_child).
        def local_address
          @listener&.io&.local_address&.inspect_sockaddr
        end

        def close(unlink: true)
          @listener&.close(unlink: unlink)
          @succession.close
        end

        def close_in_child
          io = @listener&.io
          io.close if io && !io.closed?
          @succession.close
        end
      end
    end
  end
end
