# frozen_string_literal: true

module Narwhal
  class Configurator
    # How many connections one worker holds at most (`worker_connections`):
    # the configured count, or, unset, what the descriptor limit allows. A
    # held connection costs one descriptor and a few hundred bytes, so a
    # fixed count either wastes a generous `ulimit -n` (new connections
    # left in the kernel's queue while descriptors are free) or exceeds a
    # tight one. Read from the soft RLIMIT_NOFILE when the worker starts
    # (after after_fork, which may raise it).
    class ConnectionCap
      # Kept for what is not a connection: listeners, logs, spool files,
      # the app's own descriptors (database pools, files it opens).
      RESERVE_SHARE = 8 # an eighth of the limit
      MIN_RESERVE = 64

      attr_reader :limit

      # configured: the directive's count, or nil; descriptors: the soft
      # limit (this process's when not given).
      def initialize(configured, descriptors: Process.getrlimit(:NOFILE).first)
        @descriptors = descriptors
        @limit = configured || derived
      end

      private

      def derived
        return Float::INFINITY if @descriptors == Process::RLIM_INFINITY

        # a tiny limit (below twice the reserve) still leaves half of it
        reserve = [@descriptors / RESERVE_SHARE, MIN_RESERVE].max
        [@descriptors - reserve, @descriptors / 2, 1].max
      end
    end
  end
end
