# frozen_string_literal: true

module Narwhal
  class Master
    # Replaces workers that grew too big or served their share
    # (worker_memory_limit, worker_max_requests), or whose app a soft
    # timeout interrupted (they ask, WorkerReports), without a dip in capacity:
    # the replacement is forked first, and only once it serves is the old
    # worker sent QUIT, to finish its requests and exit.
    #
    # - One replacement boots at a time: workers over a limit together
    #   queue, in the order they were found, so that a leak shared by every
    #   worker does not fork them all at once (memory and CPU are what is
    #   short when they grow).
    # - The replacement gets a spare number (WorkerTable#spawn_stand_in):
    #   the old worker keeps its own, and its scoreboard slot, while it
    #   finishes.
    # - A replacement that fails to boot is logged by the respawn policy;
    #   the old worker serves on, and another replacement is forked when
    #   that policy's back-off allows.
    # - A worker that goes by other means meanwhile (it died, HUP or TTOU
    #   retired it) leaves the queue; a replacement already forked for it
    #   holds its place.
    class Recycler
      Retirement = Struct.new(:worker, :event, :replacement)

      def initialize(workers, tally)
        @workers = workers
        @tally = tally
        @queue = []
      end

      # worker: over a limit (the monitor logged why), or asking to go
      # after a soft timeout; event: the Tally event to count once it is
      # retired, nil for none.
      def retire(worker, event)
        return if worker.recycling

        worker.recycling = true
        @queue << Retirement.new(worker, event, nil)
      end

      # On each pass of the master's loop. count: worker_processes now
      # (spare numbers start there).
      def step(count)
        while (retirement = @queue.first)
          break unless advance(retirement, count)

          @queue.shift
        end
      end

      private

      # The running configuration's (HUP may bring another).
      def logger
        @workers.logger
      end

      # Moves one retirement on; true once it is over.
      def advance(retirement, count)
        old = retirement.worker
        return true if !@workers.alive?(old) || old.quitting

        replacement = retirement.replacement
        return start(retirement, count) if replacement.nil?
        return hand_over(retirement) if replacement.ready
        return false if @workers.alive?(replacement)

        logger.warn("worker=#{old.nr} pid=#{old.pid} serves on: its replacement worker=#{replacement.nr} " \
                    "pid=#{replacement.pid} did not boot; trying again")
        retirement.replacement = nil
        false
      end

      # Forks the replacement, unless forks are held back (then later).
      # With no worker number free, old is sent QUIT at once and replaced
      # once it is gone, as Unicorn would. True when that was the case.
      def start(retirement, count)
        old = retirement.worker
        unless @workers.number_for(old.place, count)
          logger.warn("worker=#{old.nr} pid=#{old.pid}: no worker number free for a replacement, " \
                      "retiring it first")
          return quit_old(retirement)
        end
        replacement = retirement.replacement = @workers.spawn_stand_in(old, from: count)
        if replacement
          logger.info("worker=#{replacement.nr} pid=#{replacement.pid} forked to replace worker=#{old.nr} " \
                      "pid=#{old.pid}")
        end
        false
      end

      def hand_over(retirement)
        old = retirement.worker
        replacement = retirement.replacement
        logger.info("worker=#{replacement.nr} pid=#{replacement.pid} serves in place of worker=#{old.nr} " \
                    "pid=#{old.pid}: sending it QUIT")
        quit_old(retirement)
      end

      def quit_old(retirement)
        @workers.signal(retirement.worker, :QUIT)
        @tally.count(retirement.event) if retirement.event
        true
      end
    end
  end
end
