# frozen_string_literal: true

module Narwhal
  # Writes a connection's responses to its non-blocking socket without
  # waiting for the client: what the socket will not take now goes to the
  # connection's Spool, which every later write first tries to send
  # (so a client that reads promptly gets each byte as it is written), and
  # which the reactor finishes sending once the response is complete
  # (#pending?, #flush_nonblock).
  #
  # Without a budget, or once the worker's SpoolBudget has no room left
  # (memory spent, then the disk limits reached), it waits for the client
  # instead, giving up with WriteTimeout when the client takes nothing for
  # `timeout` seconds. Socket errors surface as ClientGone.
  class SocketWriter
    autoload :Counting, "narwhal/socket_writer/counting"
    autoload :Spool, "narwhal/socket_writer/spool"
    autoload :SpoolBudget, "narwhal/socket_writer/spool_budget"

    # Bytes handed to sendfile(2) per call.
    FILE_SLICE = 1024 * 1024
    # Read size where sendfile(2) is not available.
    FILE_READ_SIZE = 64 * 1024

    # budget: the worker's SpoolBudget; nil never spools. io: nil for a
    # writer the RequestLoop gives a descriptor (#attach), whose IO, of
    # io_class, is made when Ruby first writes to it.
    def initialize(io, timeout, budget = nil, io_class = nil)
      @io = io
      @timeout = timeout
      @budget = budget
      @io_class = io_class
      @fd = nil
      @spool = nil # made on the first write the socket does not take whole
    end

    # The RequestLoop accepted fd for this writer: a connection that it
    # serves and closes itself never has an IO object. A writer is given
    # another descriptor only while it has no IO (the loop closed the last).
    def attach(fd)
      @fd = fd
    end

    # The socket's descriptor (the scoreboard's, for the master's answer
    # at timeout); -1 when it is closed.
    def fileno
      @fd || @io.fileno
    rescue IOError
      -1
    end

    # The socket; made from the attached descriptor at the first call.
    def io
      @io || (@io = @io_class.for_fd(@fd))
    end

    def write(str)
      return write_behind_spool(str) if @spool && !@spool.empty?

      n = io.write_nonblock(str, exception: false)
      return if n == str.bytesize # the usual case: one syscall, no allocation

      n = 0 if n == :wait_writable
      spool_or_wait(n.zero? ? str : str.byteslice(n, str.bytesize - n))
    rescue StandardError => e
      raise client_gone(e)
    end

    # Sends str, or spools what the socket does not take now, never waiting
    # for the client: false when the rest cannot be spooled (no budget
    # left), and the caller must close, as the answer may be cut short.
    # For the server's own short answers on the reactor's thread (error
    # responses, 100 Continue).
    def write_or_spool(str)
      @spool.flush_nonblock(io) if @spool && !@spool.empty?
      if !@spool || @spool.empty?
        n = io.write_nonblock(str, exception: false)
        return true if n == str.bytesize

        str = str.byteslice(n, str.bytesize - n) unless n == :wait_writable
      end
      @budget ? (@spool ||= Spool.new(@budget)).append(str) : false
    rescue StandardError => e
      raise client_gone(e)
    end

    # Sends length bytes of the open file from its start; returns the bytes
    # sent or spooled (fewer when the file is shorter than length).
    def write_file(file, length)
      if @spool && !@spool.empty?
        @spool.flush_nonblock(io)
        return length if !@spool.empty? && spool_file(file, 0, length)
      end
      wait_for_spool
      if Narwhal.respond_to?(:sendfile_nonblock)
        sendfile(file, length)
      else
        copy_by_reading(file, length)
      end
    rescue StandardError => e
      raise client_gone(e)
    end

    # True while spooled bytes wait to be sent.
    def pending?
      @spool ? !@spool.empty? : false # the usual answer without a call
    end

    # Sends what the socket takes now of the spool; returns the bytes sent.
    # Raises ClientGone, or Spool::ShortFile when a file body ended
    # early (the spool is dropped either way).
    def flush_nonblock
      @spool.flush_nonblock(io)
    rescue Spool::ShortFile
      discard_spool
      raise
    rescue StandardError => e
      raise client_gone(e)
    end

    # Sends the whole spool, waiting for the client under the timeout:
    # before the socket is handed to someone else (hijack) or shut down.
    def flush
      wait_for_spool
    rescue StandardError => e
      raise client_gone(e)
    end

    # Frees what is spooled (the connection closes).
    def discard_spool
      @spool&.close
    end

    private

    # An error of the socket or the spool as ClientGone; the spool is
    # dropped, as the response cannot be completed. Anything else unchanged.
    def client_gone(error)
      return error unless error.is_a?(IOError) || error.is_a?(SystemCallError) ||
                          error.is_a?(Spool::ShortFile)

      discard_spool
      error.is_a?(ClientGone) ? error : ClientGone.new("#{error.class}: #{error.message}")
    end

    def write_behind_spool(str)
      @spool.flush_nonblock(io)
      return write(str) if @spool.empty?

      spool_or_wait(str)
    end

    # rest: what the socket did not take of a write.
    def spool_or_wait(rest)
      return if @budget && (@spool ||= Spool.new(@budget)).append(rest)

      wait_for_spool
      write_waiting(rest)
    end

    # File ranges take no bytes from the budget, but none is spooled when
    # spooling is off (a budget of 0).
    def spool_file(file, offset, length)
      return false unless @budget&.spooling?

      (@spool ||= Spool.new(@budget)).append_file(file, offset, length)
    end

    def wait_for_spool
      return unless @spool

      wait_writable until @spool.flush_nonblock(io) && @spool.empty?
    end

    def write_waiting(str)
      written = 0
      while written < str.bytesize
        wait_writable
        n = io.write_nonblock(written.zero? ? str : str.byteslice(written, str.bytesize - written),
                               exception: false)
        written += n unless n == :wait_writable
      end
    end

    def sendfile(file, length)
      out = io.fileno
      src = file.fileno
      sent = 0
      while sent < length
        n = Narwhal.sendfile_nonblock(out, src, sent, [FILE_SLICE, length - sent].min)
        if n.nil?
          return length if spool_file(file, sent, length - sent)

          wait_writable
        elsif n.zero?
          break # the file shrank
        else
          sent += n
        end
      end
      sent
    end

    def copy_by_reading(file, length)
      buf = String.new(capacity: FILE_READ_SIZE, encoding: Encoding::BINARY)
      sent = 0
      while sent < length && file.read([FILE_READ_SIZE, length - sent].min, buf)
        write(buf)
        sent += buf.bytesize
      end
      sent
    end

    def wait_writable
      return if io.wait_writable(@timeout)

      raise WriteTimeout, "client took no data for #{@timeout}s"
    end
  end
end
