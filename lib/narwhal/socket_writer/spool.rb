# frozen_string_literal: true

module Narwhal
  class SocketWriter
    # What one connection's socket would not take yet of its response, kept
    # in the order it must go out: bytes in memory up to the budget's
    # buffer_size, beyond it (or once the worker's memory budget is spent) in
    # an unlinked temporary file (nginx's proxy buffering), and ranges of
    # response files, which are not copied but sent from the file itself.
    # The thread that writes never waits for the client: the reactor sends
    # the rest when the socket is writable (sendfile(2) for the file parts).
    #
    # Spooled bytes are taken from the worker's SpoolBudget: memory and the
    # temporary file each from their own part. Memory is given back as it
    # goes out. Bytes of the temporary file stay on disk once sent, so they
    # stay counted until the file is emptied: truncated as soon as all its
    # bytes went out (the spool may still hold others), or closed with the
    # spool. What spools hold on disk (or tmpfs, which is memory) thus never
    # exceeds the budget's disk limits. An empty spool holds nothing: no
    # buffer, no file.
    class Spool
      # A response file ended before the length it was spooled with: the
      # response cannot be completed.
      class ShortFile < StandardError; end

      # A range of an open file still to send: of the temporary file, or of a
      # response file (own: the spool's own descriptor, closed once sent).
      FileRange = Struct.new(:file, :offset, :length, :own)

      # Bytes handed to sendfile(2) per call.
      FILE_SLICE = 1024 * 1024
      # Read size where sendfile(2) is not available.
      READ_SIZE = 64 * 1024

      def initialize(budget)
        @budget = budget
        @segments = [] # Strings (memory) and FileRanges, in the order they go out
        @memory = 0    # bytes in the Strings, taken from the budget's memory
        @tempfile = nil
        @temp_end = 0  # where the next spooled byte goes in the temporary file; taken from the budget's disk
        @temp_unsent = 0 # bytes of the temporary file still to send
      end

      def empty?
        @segments.empty?
      end

      # Bytes still to send.
      def bytesize
        @segments.sum { |s| s.is_a?(String) ? s.bytesize : s.length }
      end

      # Keeps a copy of str after what is spooled: in memory while it fits
      # the connection's buffer and the worker's memory, else in the
      # temporary file. False when it cannot: no room on disk either, or the
      # file cannot be written (the caller then sends the spool and str
      # itself, waiting for the client).
      def append(str)
        n = str.bytesize
        return true if n.zero?
        return append_memory(str) if @memory + n <= @budget.buffer_size && @budget.reserve_memory(n)

        @budget.reserve_disk(n, @temp_end) && append_temp(str)
      end

      # Spools length bytes of file from offset without copying them: the
      # spool sends them from a descriptor of its own. False when no
      # descriptor is left.
      def append_file(file, offset, length)
        @segments << FileRange.new(file.dup, offset, length, true)
        true
      rescue SystemCallError
        false
      end

      # Sends what the socket takes now, in order; returns the bytes sent.
      # Socket errors are raised as they come.
      def flush_nonblock(io)
        sent = 0
        until @segments.empty?
          segment = @segments.first
          n = segment.is_a?(String) ? send_memory(io, segment) : send_range(io, segment)
          break unless n

          sent += n
        end
        close_tempfile if @segments.empty?
        sent
      end

      # Drops what is left (the send is over or the connection closes).
      def close
        @segments.each { |s| s.file.close if s.is_a?(FileRange) && s.own }
        @segments.clear
        release_memory(@memory)
        close_tempfile
      end

      private

      def append_memory(str)
        last = @segments.last
        # a copy, in binary: the caller may reuse str, and its encoding must
        # not meet another's in one buffer
        str = str.b unless str.encoding == Encoding::BINARY
        if last.is_a?(String)
          last << str
        else
          @segments << String.new(str, encoding: Encoding::BINARY)
        end
        @memory += str.bytesize
        true
      end

      # False, with the disk bytes given back, when the file cannot be
      # opened or written (a full disk).
      def append_temp(str)
        n = str.bytesize
        @tempfile ||= System::UnlinkedTempfile.open(@budget.dir, "narwhal-response")
        # at an explicit offset: a write that failed half-way is overwritten
        written = @tempfile.pwrite(str, @temp_end)
        written += @tempfile.pwrite(str.byteslice(written, n - written), @temp_end + written) while written < n
        last = @segments.last
        if last.is_a?(FileRange) && last.file.equal?(@tempfile) && last.offset + last.length == @temp_end
          last.length += n
        else
          @segments << FileRange.new(@tempfile, @temp_end, n, false)
        end
        @temp_end += n
        @temp_unsent += n
        true
      rescue SystemCallError, IOError
        @budget.release_disk(n)
        false
      end

      def send_memory(io, str)
        n = io.write_nonblock(str, exception: false)
        return if n == :wait_writable

        if n == str.bytesize
          @segments.shift
        else
          @segments[0] = str.byteslice(n, str.bytesize - n)
        end
        release_memory(n)
        n
      end

      def send_range(io, range)
        n = transfer(io, range.file, range.offset, range.length < FILE_SLICE ? range.length : FILE_SLICE)
        return unless n
        raise ShortFile, "response file ended #{range.length} bytes before its length" if n.zero?

        range.offset += n
        range.length -= n
        temp_sent(n) unless range.own
        if range.length.zero?
          @segments.shift
          range.file.close if range.own
        end
        n
      end

      # Bytes sent from file (0 at its end), nil when the socket is full.
      def transfer(io, file, offset, length)
        return Narwhal.sendfile_nonblock(io.fileno, file.fileno, offset, length) if Narwhal.respond_to?(:sendfile_nonblock)

        data = file.pread(length < READ_SIZE ? length : READ_SIZE, offset)
        n = io.write_nonblock(data, exception: false)
        n == :wait_writable ? nil : n
      rescue EOFError
        0
      end

      # Once every byte of the temporary file went out it is emptied, and
      # only then are its bytes given back to the budget.
      def temp_sent(bytes)
        @temp_unsent -= bytes
        return unless @temp_unsent.zero?

        @tempfile.truncate(0)
        @budget.release_disk(@temp_end)
        @temp_end = 0
      end

      def release_memory(bytes)
        return if bytes.zero?

        @memory -= bytes
        @budget.release_memory(bytes)
      end

      def close_tempfile
        return unless @tempfile

        @tempfile.close
        @tempfile = nil
        @budget.release_disk(@temp_end) unless @temp_end.zero?
        @temp_end = 0
        @temp_unsent = 0
      end
    end
  end
end
