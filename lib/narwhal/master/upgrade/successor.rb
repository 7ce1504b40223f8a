# frozen_string_literal: true

module Narwhal
  class Master
    module Upgrade
      # The new master USR2 started, as the old master follows it: what it
      # said on the channel (serving, ready, failed), how long it may take
      # (upgrade_timeout), the worker count to go back to if it fails, and
      # the signals held back until it has proved itself.
      #
      # With upgrade_timeout the old master loses nothing before the
      # verdict: QUIT, TTOU and WINCH (a `before_fork` hook that retires
      # the old master, an operator's hand) wait for it, and are acted on
      # once the new master is ready, or dropped if it fails.
      class Successor
        HELD_BACK = %w[QUIT TTOU WINCH].freeze
        # Past the deadline, a new master that gave no verdict gets this long
        # to give it before it is killed: it keeps the deadline itself, and
        # only a master stuck before its loop (a preloaded app that hangs)
        # misses it.
        GRACE = 10

        attr_reader :pid, :worker_processes, :held_back

        # worker_processes: the old master's count at USR2, what a failure
        # brings back.
        def initialize(pid, channel, worker_processes, logger)
          @pid = pid
          @channel = channel
          @terms = channel.terms
          @worker_processes = worker_processes
          @logger = logger
          @said = nil # :serving, :ready, :failed
          @held_back = []
          @lost = false
        end

        # The upgrade is over without it (it gave up, was killed, died):
        # true the first time only, so that what it took is given back once.
        def lose
          return false if @lost

          @lost = true
        end

        def reader
          @channel.reader
        end

        # upgrade_timeout as it was at USR2 (seconds), nil without one.
        def timeout
          @terms["timeout"]
        end

        # Its workers serve, some or all: the service is ready whoever answers.
        def serving?
          %i[serving ready].include?(@said)
        end

        def ready?
          @said == :ready
        end

        # Whether signals that take workers away wait for the verdict.
        def verdict_pending?
          !@terms["deadline"].nil? && !%i[ready failed].include?(@said)
        end

        # True when the signal is held back until the verdict (logged).
        def hold_back(sig)
          return false unless HELD_BACK.include?(sig) && verdict_pending?

          @held_back << sig
          @logger.info("#{sig} held back: the new master pid=#{@pid} is not ready yet (upgrade_timeout " \
                       "#{timeout}s); acted on once it is, dropped if it fails")
          true
        end

        # On each pass of the old master's loop: what happened since, as
        # [:serving], [:ready], [:failed, reason] or [:overdue].
        def events(now)
          heard = @channel.messages.filter_map { |kind, text| hear(kind, text) }
          heard << [:overdue] if overdue?(now)
          heard
        end

        # Seconds until it is overdue; nil when that cannot happen.
        def wait(now)
          [@terms["deadline"] + GRACE - now, 0].max if verdict_pending?
        end

        def close
          @channel.close
        end

        private

        def hear(kind, text)
          case kind
          when "serving" then @said ||= :serving
          when "ready" then @said = :ready
          when "failed" then @said = :failed
          else return nil # a line of a later version
          end
          kind == "failed" ? [:failed, text] : [kind.to_sym]
        end

        # Once only: it is killed, then reaped as any dead successor is.
        def overdue?(now)
          return false unless verdict_pending? && now >= @terms["deadline"] + GRACE

          @said = :failed
          true
        end
      end
    end
  end
end
