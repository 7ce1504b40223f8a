# frozen_string_literal: true

require "tmpdir"

module Narwhal
  class SocketWriter
    # How many response bytes one worker may hold for clients that read
    # slowly (Spool), shared by all its connections and, with request
    # threads, by all its threads. Memory first, within memory_max; then the
    # spools' temporary files in dir, as nginx's proxy buffering does: at most
    # file_max bytes for one response, disk_max for the worker, and never
    # leaving the file system with less than disk_reserve bytes free. Past
    # those a writer waits for its client under write_timeout instead, so
    # that many slow readers fill neither the memory nor the disk.
    class SpoolBudget
      # the directives' defaults, for a budget made without a configuration
      DEFAULTS = Configurator::DEFAULTS

      # memory_max: bytes in memory for the whole worker (0: never spool,
      # not even to disk); buffer_size: what one connection keeps in memory
      # before it spools to a temporary file; dir: where those files go.
      attr_reader :memory_max, :buffer_size, :file_max, :disk_max, :disk_reserve, :dir

      # The worker's budget, from the configuration's response_* settings.
      def self.from_config(config)
        new(config[:response_spool_max], config[:response_buffer_size],
            file_max: config[:response_spool_file_max], disk_max: config[:response_spool_disk_max],
            disk_reserve: config[:response_spool_disk_reserve])
      end

      # free_space: a callable that returns the bytes free on dir's file
      # system (a stand-in in tests).
      def initialize(memory_max, buffer_size, file_max: DEFAULTS[:response_spool_file_max],
                     disk_max: DEFAULTS[:response_spool_disk_max], disk_reserve: DEFAULTS[:response_spool_disk_reserve],
                     dir: Dir.tmpdir, free_space: nil)
        @memory_max = memory_max
        @buffer_size = buffer_size
        @file_max = file_max
        @disk_max = disk_max
        @disk_reserve = disk_reserve
        @dir = dir
        @free_space = free_space || -> { Narwhal.free_bytes(dir) }
        @memory = 0
        @disk = 0
        @lock = Mutex.new
      end

      # False when spooling is off: every write waits for its client.
      def spooling?
        @memory_max.positive?
      end

      # Takes bytes of memory; false (nothing taken) when they do not fit.
      def reserve_memory(bytes)
        @lock.synchronize do
          return false if @memory + bytes > @memory_max

          @memory += bytes
        end
        true
      end

      def release_memory(bytes)
        @lock.synchronize { @memory -= bytes }
        nil
      end

      # Takes bytes on disk for a response whose temporary file holds
      # file_bytes already; false (nothing taken) past a limit, or when the
      # file system would be left with less than the reserve. The free space
      # is read outside the lock: threads that race for the last bytes above
      # the reserve overshoot it by one write at most.
      def reserve_disk(bytes, file_bytes)
        return false unless spooling? && file_bytes + bytes <= @file_max && room_on_disk?(bytes)

        @lock.synchronize do
          return false if @disk + bytes > @disk_max

          @disk += bytes
        end
        true
      end

      def release_disk(bytes)
        @lock.synchronize { @disk -= bytes }
        nil
      end

      def memory_used
        @lock.synchronize { @memory }
      end

      def disk_used
        @lock.synchronize { @disk }
      end

      # Memory and disk together.
      def used
        @lock.synchronize { @memory + @disk }
      end

      private

      # A file system that cannot be read (dir removed) has no room.
      def room_on_disk?(bytes)
        @free_space.call - bytes >= @disk_reserve
      rescue SystemCallError
        false
      end
    end
  end
end
