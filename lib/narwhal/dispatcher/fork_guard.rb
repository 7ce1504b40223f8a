# frozen_string_literal: true

module Narwhal
  module Dispatcher
    # Refuses fork in a process whose request threads run: the child would
    # inherit, held forever, every lock another thread held at that instant
    # (the allocator's, the app's connection pools', the logger's), and can
    # deadlock on the first of them. Process._fork is the one hook every fork
    # goes through (Kernel#fork, Process.fork, IO.popen("-")); spawn, system
    # and backticks start a new program and do not use it.
    module ForkGuard
      def self.arm(threads)
        @threads = threads
        Process.singleton_class.prepend(Hook) unless Process.singleton_class.include?(Hook)
      end

      def self.disarm
        @threads = nil
      end

      def self.threads
        @threads
      end

      # Prepended to Process's singleton class.
      module Hook
        def _fork
          threads = ForkGuard.threads
          if threads
            raise ForkError, "fork in a worker with request threads (threads #{threads}): the child would " \
                             "inherit locks held by other threads; use spawn or system, or threads 1"
          end

          super
        end
      end
    end
  end
end
