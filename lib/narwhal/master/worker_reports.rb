# frozen_string_literal: true

module Narwhal
  class Master
    # A pipe from the workers to the master for what the master cannot see
    # from outside: a worker is ready to serve, it failed to boot and why, or
    # it asks to be replaced (a soft timeout interrupted its app).
    # A report is one line ("PID ready", "PID failed MESSAGE", "PID retire") written with a
    # single write smaller than PIPE_BUF, so reports of several workers never
    # interleave; a worker writes it before it exits, so the master, which
    # reads the pipe before acting on a reaped worker, always has it by then.
    class WorkerReports
      MAX_MESSAGE = 2048 # bytes; well under PIPE_BUF (4096 on Linux)
      READ_SIZE = 16_384

      attr_reader :reader

      def initialize
        @reader, @writer = IO.pipe
        @buffer = String.new(encoding: Encoding::BINARY)
      end

      # In a worker: only the write end is its business.
      def close_reader
        @reader.close
      end

      def ready
        send_line("#{Process.pid} ready")
      end

      # Returns false when the master could not be told.
      def retire
        send_line("#{Process.pid} retire")
      end

      # Returns false when the master could not be told (the worker then
      # logs the error itself).
      def boot_failed(message)
        text = message.to_s.tr("\r\n", "  ").b[0, MAX_MESSAGE]
        send_line("#{Process.pid} failed #{text}")
      end

      # In the master: every complete report so far, as [pid, kind, message].
      def drain
        while (chunk = @reader.read_nonblock(READ_SIZE, exception: false)).is_a?(String)
          @buffer << chunk
        end
        reports = []
        while (line = @buffer.slice!(/\A[^\n]*\n/))
          pid, kind, message = line.chomp.split(" ", 3)
          reports << [pid.to_i, kind, String.new(message.to_s, encoding: Encoding::UTF_8).scrub]
        end
        reports
      end

      private

      def send_line(line)
        @writer.write_nonblock("#{line}\n", exception: false).is_a?(Integer)
      rescue IOError, SystemCallError
        false
      end
    end
  end
end
