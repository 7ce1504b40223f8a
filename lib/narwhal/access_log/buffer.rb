# frozen_string_literal: true

module Narwhal
  class AccessLog
    # Whole lines gathered for one write(2): a write per line costs a
    # system call per request, more than building the line. The lines of
    # all the worker's threads go into one buffer, under a lock, and out
    # when the next line would pass the bound, a second after the first
    # line waiting (a thread of its own waits for that, and sleeps while
    # nothing waits), when the worker exits, and before USR1 reopens the
    # file.
    #
    # The bound keeps writes whole: the kernel appends a write to an
    # O_APPEND file whole, and one to a pipe whole up to PIPE_BUF; a line
    # longer than the bound goes out alone. A worker killed with SIGKILL
    # (timeout, OOM) loses what waits, at most a second's lines.
    class Buffer
      FILE_BOUND = 32 * 1024
      PIPE_BUF = 4096
      FLUSH_INTERVAL = 1.0

      # out: called with the bytes to write (AccessLog#write_out).
      def initialize(out, bound)
        @out = out
        @bound = bound
        @pending = String.new(capacity: bound, encoding: Encoding::BINARY)
        @lock = Mutex.new
        @waiting = ConditionVariable.new
        @flusher = nil
      end

      def <<(line)
        @lock.synchronize do
          start_flusher unless @flusher
          flush_locked if @pending.bytesize + line.bytesize > @bound
          if line.bytesize > @bound
            @out.call(line)
          else
            @waiting.signal if @pending.empty?
            @pending << line
          end
        end
      end

      def flush
        @lock.synchronize { flush_locked }
      end

      # From a signal handler just before exit!: no lock can be waited for
      # there; when another thread holds it (mid-append), write anyway.
      def flush_at_exit
        locked = @lock.try_lock
        flush_locked
      ensure
        @lock.unlock if locked
      end

      private

      def flush_locked
        return if @pending.empty?

        @out.call(@pending)
        @pending.clear
      end

      # In the worker, at its first line: the master (preload_app) and
      # workers without an access log have no such thread.
      def start_flusher
        @flusher = Thread.new do
          Thread.current.name = "narwhal access_log"
          @lock.synchronize do
            while true # rubocop:disable Style/InfiniteLoop
              @waiting.wait(@lock) while @pending.empty?
              @waiting.wait(@lock, FLUSH_INTERVAL) # let more lines come
              flush_locked
            end
          end
        end
      end
    end
  end
end
