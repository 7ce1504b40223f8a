# frozen_string_literal: true

module Narwhal
  class Master
    module Upgrade
      # A master started by USR2, until every one of its workers serves. It
      # tells the master that started it through the Channel: `serving` at
      # its first ready worker, then `ready`, or `failed` with the reason
      # when it gives up.
      class Probation
        # The new master's probation, nil when it was not started by USR2.
        def self.take(logger, env = ENV)
          channel = Channel.take(env)
          channel && new(channel, logger)
        end

        def initialize(channel, logger, clock: Clock)
          @channel = channel
          @terms = channel.terms
          @logger = logger
          @clock = clock
          @started = @terms["started"] || clock.now # USR2
          @verdict = nil # :ready, :failed
        end

        def pending?
          @verdict.nil?
        end

        def old_pid
          @terms["old_pid"]
        end

        # Its first worker serves.
        def serving
          @channel.tell(:serving) if pending?
        end

        # On each pass of the new master's loop (workers: its WorkerTable):
        # :ready once every worker serves, else nil.
        def judge(workers, count)
          return nil unless pending?

          ready = workers.count { |w| w.ready && !w.quitting }
          succeed(ready) if ready >= count
        end

        # It gives up (no worker could boot): the old master is told, and
        # serves on.
        def fail(reason)
          return unless pending?

          @verdict = :failed
          @channel.tell(:failed, reason)
          @channel.close
        end

        # In a forked worker: the channel is the master's.
        def forget_in_child
          @channel.close
        end

        private

        def succeed(ready)
          @verdict = :ready
          @logger.info("upgrade: all #{ready} workers ready, #{format('%.1f', @clock.now - @started)}s " \
                       "after USR2; telling the old master pid=#{old_pid}")
          @channel.tell(:ready)
          @channel.close
          :ready
        end
      end
    end
  end
end
