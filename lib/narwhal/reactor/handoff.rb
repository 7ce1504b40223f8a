# frozen_string_literal: true

module Narwhal
  class Reactor
    # What passes between a worker's app threads and its reactor's loop
    # (request threads only): which handlers an app thread has (parked),
    # the answers for the loop to carry out (a mailbox: close and release
    # are the loop's alone), and the pipe that wakes the loop for them.
    #
    # One lock covers all of it; the loop takes it too while it lets a
    # handler go, so that an app thread re-arming a descriptor can never
    # reach a number closed and given to another connection in between.
    class Handoff
      WAKE_BYTE = "!"

      attr_reader :reader

      def initialize
        @lock = Mutex.new
        @mail = []      # handler, action, handler, action, ...
        @parked = {}    # handler => true while an app thread has it
        @reader, @writer = IO.pipe
      end

      # On the loop's thread, before a thread can have the handler.
      def park(handler)
        @lock.synchronize { @parked[handler] = true }
      end

      def parked?(handler)
        @lock.synchronize { @parked.key?(handler) }
      end

      # From an app thread: the handler is the loop's again; the block
      # (re-arming it) runs under the lock.
      def give_back(handler)
        @lock.synchronize do
          @parked.delete(handler)
          yield
        end
      end

      # From an app thread: an answer for the loop to carry out.
      def post(handler, action)
        @lock.synchronize { @mail.push(handler, action) }
        wake
      end

      # The loop's side of #give_back: the block runs under the lock.
      def exclusively(handler)
        @lock.synchronize do
          @parked.delete(handler)
          yield
        end
      end

      # The answers posted since the last call, as [handler, action] pairs.
      def take
        @reader.read_nonblock(4096, exception: false)
        mail = @lock.synchronize do
          taken = @mail
          @mail = []
          taken
        end
        mail.each_slice(2).to_a
      end

      def wake
        @writer.write_nonblock(WAKE_BYTE, exception: false)
      rescue IOError
        nil # the loop is gone
      end

      def close
        @writer.close
        @reader.close
      end
    end
  end
end
