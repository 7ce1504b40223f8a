# frozen_string_literal: true

module Narwhal
  # How many response bytes one worker may hold for clients that read
  # slowly (ResponseSpool: memory and temporary files together), shared by
  # all its connections and, with request threads, by all its threads.
  # Beyond it a writer waits for its client under write_timeout instead,
  # so that many slow readers cannot fill the memory or the disk.
  class SpoolBudget
    # max: the bound in bytes (0: never spool); buffer_size: what one
    # connection keeps in memory before it spools to a temporary file.
    attr_reader :max, :buffer_size

    def initialize(max, buffer_size)
      @max = max
      @buffer_size = buffer_size
      @used = 0
      @lock = Mutex.new
    end

    # Takes bytes from the budget; false (nothing taken) when they do not fit.
    def reserve(bytes)
      @lock.synchronize do
        return false if @used + bytes > @max

        @used += bytes
      end
      true
    end

    def release(bytes)
      @lock.synchronize { @used -= bytes }
      nil
    end

    def used
      @lock.synchronize { @used }
    end
  end
end
