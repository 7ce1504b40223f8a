# frozen_string_literal: true

module Narwhal
  class Reactor
    # Pipes whose readability runs a block (signals, the master's pipes): in
    # the loop, or with request threads on the thread that keeps the loop
    # threads (Threads), so that they run even while every thread is in the app.
    module Watching
      # Runs a block when a pipe is readable (signals, the master's pipe).
      Watcher = Struct.new(:block) do
        def on_readable
          block.call
          KEEP
        end
      end

      # Calls the block whenever io is readable: in the loop, or with
      # request threads on the thread that keeps them (Threads).
      def watch(io, &block)
        return @watchers[io] = block if @threaded

        fd = io.fileno
        @targets[fd] = Watcher.new(block)
        @writing[fd] = false
        @poller.add(fd, Poller::READ)
      end

      def unwatch(io)
        return @watchers.delete(io) if @threaded

        forget(io.fileno)
      end
    end
  end
end
