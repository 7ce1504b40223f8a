# frozen_string_literal: true

module Narwhal
  class Reactor
    # The loop threads of a worker with request threads: each runs the
    # reactor's loop and the requests it reads. The thread that runs this
    # (the process's main thread) serves no request: it runs the watchers
    # (signals, the master's pipes), so that they are handled at once even
    # while every loop thread is in the app, and it keeps the loop threads'
    # number: a thread the app ended (Thread#exit or #kill run no rescue,
    # only ensure blocks) is replaced, or the worker would serve with one
    # thread fewer for the rest of its life.
    #
    # Handler descriptors are then armed ONESHOT and claimed (Poller): a
    # report goes to exactly one thread, which owns the handler until it
    # re-arms it or lets it go; the sweep and closing touch only handlers
    # no thread owns. What threads share (the handler table, the
    # listeners' state) is changed under one lock or with single
    # Array/Hash operations, and iterated over copies. See docs/DESIGN.md.
    class Threads
      WAKE_BYTE = "!"

      # on_thread: called first in each thread with its index; loop: what
      # each thread then runs until the reactor is finished.
      def initialize(count, logger, on_thread, &loop)
        @count = count
        @logger = logger
        @on_thread = on_thread
        @loop = loop
        @ended = Thread::Queue.new
        @wake_reader, @wake_writer = IO.pipe
        @stop_waiting = false
      end

      # Until every thread ended with the reactor finished (or #stop_waiting).
      # watchers: IO => block, run here when the IO is readable (the hash
      # may change from within a block).
      def run(reactor, watchers)
        @threads = Array.new(@count) { |i| start(i) }
        @running = @count
        until @running.zero? || @stop_waiting
          ready, = IO.select([@wake_reader, *watchers.keys])
          ready.each { |io| io.equal?(@wake_reader) ? reap(reactor) : run_watcher(watchers[io]) }
        end
      ensure
        # the writing end first: a thread that ends meanwhile then finds it
        # closed (IOError, see #wake), never a pipe without a reader (EPIPE)
        @wake_writer.close
        @wake_reader.close
      end

      # Some loop thread has not ended (after #stop_waiting).
      def running?
        @running.to_i.positive?
      end

      # An immediate stop: #run returns without waiting for threads still
      # in the app (the process is about to exit).
      def stop_waiting
        @stop_waiting = true
        wake
      end

      private

      def start(i)
        Thread.new do
          Thread.current.name = "narwhal request #{i}"
          @on_thread.call(i)
          @loop.call
        ensure
          @ended << i
          wake
        end
      end

      def run_watcher(block)
        block&.call
      rescue StandardError => e
        @logger.error("internal error: #{e.class}: #{e.message}#{ErrorMessage.backtrace(e)}")
      end

      def reap(reactor)
        @wake_reader.read_nonblock(256, exception: false)
        until @ended.empty?
          i = @ended.pop
          if reactor.finished? || reactor.closing?
            @running -= 1
          else
            @logger.error("request thread #{i} was ended by the app; starting another")
            @threads[i] = start(i)
          end
        end
      end

      def wake
        @wake_writer.write_nonblock(WAKE_BYTE, exception: false)
      rescue IOError
        nil # #run is over
      end
    end
  end
end
