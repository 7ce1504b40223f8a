# frozen_string_literal: true

module Narwhal
  class Master
    module Upgrade
      # `upgrade_retire_old true`: once the new master serves with all its
      # workers, the old master hands the traffic over by itself, one
      # worker at a time, as TTOU would (one worker fewer: the master sends
      # it QUIT, and it finishes its requests), the next only once the last
      # one is gone; with no worker left, it stops as on QUIT. The new
      # generation serves at full strength throughout, so the two together
      # never have fewer workers than one of them.
      class Handoff
        def initialize(successor_pid, logger)
          @successor_pid = successor_pid
          @logger = logger
          @retired = 0
        end

        # On each pass of the old master's loop: the worker count to keep,
        # one fewer than `count` when the previous worker is gone.
        def step(workers, count)
          return count if count.zero? || workers.any?(&:quitting)

          count -= 1
          workers.select { |w| w.place >= count }.each do |worker|
            @retired += 1
            @logger.info("upgrade: retiring old worker=#{worker.nr} pid=#{worker.pid} (#{@retired} retired, " \
                         "#{count} left); the new master pid=#{@successor_pid} serves")
          end
          count
        end

        # Every old worker is gone: the old master may stop.
        def done?(workers, count)
          count.zero? && workers.none?
        end
      end
    end
  end
end
