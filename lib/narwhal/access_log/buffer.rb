# frozen_string_literal: true

module Narwhal
  class AccessLog
    # Whole lines gathered for one write(2): a write per line costs a
    # system call per request, more than building the line. The lines of
    # all the worker's threads go into one buffer, under a lock, and out
    # when the next line would pass the bound, at the worker's next sweep
    # (its reactor calls #flush at least every Reactor::SWEEP_INTERVAL),
    # when the worker exits, and before USR1 reopens the file. No thread of
    # its own: a thread that sleeps still costs every request about a
    # microsecond (the GVL's bookkeeping).
    #
    # The bound keeps writes whole: the kernel appends a write to an
    # O_APPEND file whole, and one to a pipe whole up to PIPE_BUF; a line
    # longer than the bound goes out alone. A worker killed with SIGKILL
    # (timeout, OOM) loses what waits: the lines since its last sweep.
    #
    # Two strings take turns: the lines being written leave @pending before
    # the write, so the exit handler (which may run while a flush is inside
    # its write(2)) writes only the lines that came after, never those again.
    class Buffer
      FILE_BOUND = 32 * 1024
      PIPE_BUF = 4096

      # out: called with the bytes to write (AccessLog#write_out).
      def initialize(out, bound)
        @out = out
        @bound = bound
        @pending = String.new(capacity: bound, encoding: Encoding::BINARY)
        @writing = String.new(capacity: bound, encoding: Encoding::BINARY)
        @lock = Mutex.new
      end

      def <<(line)
        @lock.synchronize do
          flush_locked if @pending.bytesize + line.bytesize > @bound
          if line.bytesize > @bound
            @out.call(line)
          else
            @pending << line
          end
        end
      end

      # Looks without the lock first (every sweep, mostly with nothing
      # waiting): a line appended meanwhile goes out at the next one.
      def flush
        @lock.synchronize { flush_locked } unless @pending.empty?
      end

      # From a signal handler just before exit!: no lock can be waited for
      # there; when a thread holds it (mid-append, or mid-flush: its lines
      # are in @writing by then), write what waits anyway.
      def flush_at_exit
        locked = @lock.try_lock
        @out.call(@pending) unless @pending.empty?
      ensure
        @lock.unlock if locked
      end

      private

      # The swap is one step for signal handlers and threads (no interrupt
      # check between its instructions): the lines are in @pending or in
      # @writing, never in both and never in neither.
      def flush_locked
        return if @pending.empty?

        @pending, @writing = @writing, @pending
        begin
          @out.call(@writing)
        ensure
          @writing.clear
        end
      end
    end
  end
end
