# frozen_string_literal: true

module Narwhal
  class Master
    class Control
      class Agent
        # The line haproxy's agent-check reads from `agent_listen`, made of
        # what the control listener reports (Status#to_h: the scoreboard, the
        # worker table, the listen queues), never of anything a worker says.
        # One line, words haproxy 2.x understands, the first case that holds:
        #
        #   drain                 the master stops (graceful TERM's drain_delay,
        #                         QUIT, TERM, INT), or worker_processes is 0
        #                         (WINCH, TTOU)
        #   up ready 63%          workers serve; the weight is their idle capacity
        #   drain                 none serves, and the workers on their way will
        #                         (HUP, recycling, a crash's replacement): this
        #                         master's workers served before and none failed
        #                         to boot since
        #   down #booting         none serves: the first workers boot, or
        #   down #failing to boot  boots fail, or
        #   down #no worker       no worker runs
        #
        # `up` and `ready` are always said with the weight: they undo this
        # agent's own `down` and `drain` (haproxy keeps them until an agent
        # says otherwise, across a restart of narwhal too).
        #
        # The weight, a percentage of the server's configured weight:
        #
        #   capacity = worker_processes x threads
        #   idle     = free threads of the serving workers - connections in
        #              the listen queues (accepted by no worker yet)
        #   weight   = floor(100 x idle / capacity), from MIN_WEIGHT to 100
        #
        # MIN_WEIGHT keeps a trickle going to a server that is busy but
        # alive: at 0 haproxy would show it drained.
        #
        # The old master of a USR2 hand-over answers with its own weight
        # while the new one boots (the instance serves on: a drain would
        # take a lone server out of its backend), and stops answering once
        # the new master's first worker serves (Succession); it drains when
        # it is told to stop.
        module Reply
          MIN_WEIGHT = 1

          def self.line(status)
            "#{words(status)}\n"
          end

          def self.words(status)
            return "drain" if leaving?(status)
            return "up ready #{weight(status)}%" if status["workers"].any? { |w| Status.serving?(w) }
            return "drain" if replacing?(status)

            "down ##{why_down(status)}"
          end

          # A whole percentage, MIN_WEIGHT to 100.
          def self.weight(status)
            capacity = status["worker_processes"] * status["threads"]
            serving = status["workers"].select { |w| Status.serving?(w) }
            free = serving.sum { |w| [w["threads"] - w["busy_threads"], 0].max }
            queued = status["listeners"].sum { |l| l["queue"].to_i }
            ((free - queued) * 100 / capacity).clamp(MIN_WEIGHT, 100)
          end

          # The master's own decision: it stops, or wants no worker.
          def self.leaving?(status)
            status["draining"] || status["worker_processes"].zero?
          end

          # Workers are on their way (booting, or finishing before a
          # replacement is forked) and nothing says they will not serve.
          def self.replacing?(status)
            status["ever_ready"] && status["boot_failures"].zero? && status["workers"].any?
          end

          def self.why_down(status)
            return "failing to boot" if status["boot_failures"].positive?
            return "no worker" if status["workers"].empty?

            "booting"
          end
        end
      end
    end
  end
end
