# frozen_string_literal: true

module Narwhal
  class Master
    class Control
      # The control listener's socket across USR2, passed down as the app's
      # listeners are, so that a probe is never refused while one generation
      # replaces the other (a new master binding the address only once the
      # old one is gone leaves a gap). The new master answers on it once its
      # first worker serves; the old one lets go of it on QUIT (or TERM).
      # Until then both answer, and both answer 200. The agent's socket
      # (`agent_listen`, Agent) goes the same way under a name of its own.
      module Handover
        ENV_NAME = "NARWHAL_CONTROL_FD"

        # In USR2's child, just before exec: returns exec's redirection map.
        def self.pass_on_exec(listener, env = ENV, name: ENV_NAME)
          fd = listener.io.fileno
          env[name] = fd.to_s
          listener.io.close_on_exec = false
          { fd => fd }
        end

        # In a new master: the socket the old one passed down when it is the
        # configured address, nil without one. One passed down and not wanted
        # (control_listen changed or removed: address nil) is closed, so that
        # neither the workers nor what the app runs inherit it.
        def self.take(address, env = ENV, name: ENV_NAME)
          fd = env.delete(name) or return nil
          listener = Listener.inherit(Integer(fd, 10))
          return listener if address && listener.address == Listener.expand_addr(address)

          listener.close(unlink: false)
          nil
        rescue SystemCallError, IOError, SocketError, ArgumentError
          nil
        end
      end
    end
  end
end
