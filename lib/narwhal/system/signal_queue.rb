# frozen_string_literal: true

module Narwhal
  module System
    # The self-pipe signal queue of a narwhal process (the master, a worker,
    # a standalone server). A queued signal's handler only appends its name
    # and writes a byte to a pipe; the process's loop waits on `reader`, then
    # takes the names in order and acts on them outside the handler, where
    # no lock the loop holds can deadlock it.
    #
    # The handler each signal had before narwhal touched it is remembered the
    # first time the signal is trapped here, and `restore` puts it back: a
    # program that runs narwhal inside it (rackup, rails server, a script)
    # gets its own INT/TERM handlers back when narwhal returns.
    class SignalQueue
      # readable while a signal is queued or a wake-up is pending
      attr_reader :reader

      def initialize
        @reader, @writer = IO.pipe
        @queue = []
        @previous = {}
      end

      # The handlers append the signal's name and wake the loop.
      def queue(*names)
        names.each do |name|
          install(name) do
            @queue << name
            wake
          end
        end
      end

      # The handlers only wake the loop (the master's CHLD: it reaps anyway).
      def wake_on(*names)
        names.each { |name| install(name) { wake } }
      end

      # The handlers run the block at once, in the handler (a worker's INT
      # and TERM exit even inside a request).
      def handle(*names, &block)
        names.each { |name| install(name, &block) }
      end

      # Queues an event that is not a signal, from any thread of the process:
      # the loop takes it in order with the signals, on its own thread.
      def push(name)
        @queue << name
        wake
      end

      # The oldest signal not yet taken, or nil.
      def pop
        @queue.shift
      end

      # Empties the pipe. Before `pop`: a signal arriving after it leaves a
      # byte behind and wakes the next wait.
      def clear_wakeups
        nil while @reader.read_nonblock(1024, exception: false).is_a?(String)
      rescue IOError
        nil
      end

      # Sleeps until a signal or one of `others` is readable, at most
      # `timeout` seconds; returns the readable IOs (nil on timeout), wake-ups
      # cleared.
      def wait(timeout, others = [])
        ready = IO.select([@reader, *others], nil, nil, timeout)
        clear_wakeups if ready
        ready&.first
      end

      def wake
        @writer.write_nonblock(".", exception: false)
      rescue IOError
        nil # closed: a forked child before it reset its handlers, or after restore
      end

      # The handlers found before narwhal's are back; the pipe is closed.
      def restore
        @previous.each { |name, handler| trap(name, handler) }
        @previous.clear
        close
      end

      # In a child forked from a process whose queue this is: the handlers
      # go back to the defaults, `ignore` ones are ignored until the child
      # installs its own, and the parent's pipe is closed here.
      def reset_in_child(ignore: [])
        @previous.each_key { |name| trap(name, "DEFAULT") }
        ignore.each { |name| trap(name, "IGNORE") }
        @previous.clear
        @queue.clear
        close
      end

      private

      def install(name, &handler)
        previous = trap(name, &handler)
        @previous[name] = previous unless @previous.key?(name)
      end

      def close
        [@reader, @writer].each { |io| io.close unless io.closed? }
      end
    end
  end
end
