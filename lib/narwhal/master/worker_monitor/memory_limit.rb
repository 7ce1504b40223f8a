# frozen_string_literal: true

module Narwhal
  class Master
    class WorkerMonitor
      # `worker_memory_limit`: a worker whose memory (RSS, or PSS with
      # `pss: true`) is above the limit is recycled: the Recycler forks its
      # replacement first and QUITs it once that serves. Memory is read
      # from /proc every `interval` seconds, not on every pass of the
      # master's loop: reading PSS makes the kernel walk the page tables.
      #
      # A worker that has not served a request yet is left alone: it is as
      # big as it was born (a preloaded app's pages count in its RSS), and a
      # replacement would be born as big.
      class MemoryLimit
        attr_reader :interval

        # memory: what reads a pid's size (System::ProcessMemory; tests fake it).
        def initialize(bytes, pss: false, interval: 5, memory: System::ProcessMemory)
          @bytes = bytes
          @kind = pss ? :pss : :rss
          @interval = interval
          @memory = memory
          @next_at = nil
        end

        def signal
          :QUIT
        end

        def event
          :memory_recycles
        end

        # Once per interval; the first pass at once.
        def due?(now)
          return false if @next_at && now < @next_at

          @next_at = now + @interval
          true
        end

        def breach(worker, scoreboard)
          return if scoreboard.requests(worker.nr).zero?

          size = @memory.public_send(@kind, worker.pid)
          return unless size && size > @bytes

          "memory #{Configurator::ByteSize.format(size)} (#{@kind.upcase}) > worker_memory_limit #{Configurator::ByteSize.format(@bytes)}, " \
            "recycling"
        end
      end
    end
  end
end
