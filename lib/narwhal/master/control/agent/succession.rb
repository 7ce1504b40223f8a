# frozen_string_literal: true

module Narwhal
  class Master
    class Control
      class Agent
        # Which of two masters answers the agent socket during a USR2
        # hand-over. Both hold the socket (Handover); were both to answer,
        # haproxy would hear the old master's `drain` and the new one's
        # weight in turn, and flap the server between DRAIN and READY. So
        # the old master answers alone until the new one's first worker
        # serves, then the new one alone:
        #
        # - every master with `agent_listen` has a pipe; USR2's child takes
        #   its write end across the exec (ENV_NAME);
        # - the new master writes one byte on it when it starts answering
        #   (#announce), and closes it;
        # - the old master's control thread watches the read end: from that
        #   byte on it accepts no more agent connections (#yielded?), unless
        #   the new master dies (#take_back).
        #
        # The old master keeps its write end open, so the read end never
        # sees an end of file: only the byte means something.
        class Succession
          ENV_NAME = "NARWHAL_AGENT_SUCCESSOR_FD"

          # In a new master: the write end its predecessor passed down, nil
          # without one.
          def self.take(env = ENV)
            fd = env.delete(ENV_NAME) or return nil
            IO.for_fd(Integer(fd, 10)).tap { |io| io.close_on_exec = true }
          rescue SystemCallError, ArgumentError
            nil
          end

          # What the control thread watches.
          attr_reader :reader

          # predecessor: from Succession.take, or nil.
          def initialize(predecessor: nil)
            @reader, @writer = IO.pipe
            @predecessor = predecessor
            @yielded = false
          end

          # Whether a USR2 successor answers instead of this master.
          def yielded?
            @yielded
          end

          # USR2's child, just before exec: returns exec's redirection map.
          def pass_on_exec(env = ENV)
            fd = @writer.fileno
            env[ENV_NAME] = fd.to_s
            @writer.close_on_exec = false
            { fd => fd }
          end

          # This master answers from now on; its predecessor, if any, stops.
          def announce
            @predecessor&.write_nonblock(".", exception: false)
          rescue SystemCallError, IOError
            nil # the predecessor is gone already
          ensure
            @predecessor&.close
            @predecessor = nil
          end

          # The reader is readable: returns true when the successor just
          # announced itself.
          def on_readable
            data = @reader.read_nonblock(64, exception: false)
            return false unless data.is_a?(String)

            @yielded = true
          end

          # The successor died: this master answers again.
          def take_back
            @yielded = false
          end

          def close
            [@reader, @writer, @predecessor].each { |io| io.close if io && !io.closed? }
          end
        end
      end
    end
  end
end
