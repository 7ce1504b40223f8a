# frozen_string_literal: true

module Narwhal
  # The client went away (or stopped taking data) while we sent a response.
  # An IOError, so that apps rescuing IOError around stream writes still see
  # it; the server tells it apart from the app's own I/O errors.
  class ClientGone < IOError; end

  # A client took no bytes for write_timeout seconds.
  class WriteTimeout < ClientGone; end

  # Writes whole strings and files to a non-blocking client socket, giving
  # up with WriteTimeout when the client takes nothing for `timeout` seconds,
  # so that a client that stops reading cannot hold the serving thread.
  # Socket errors surface as ClientGone.
  class SocketWriter
    # Bytes handed to sendfile(2) per call.
    FILE_SLICE = 1024 * 1024
    # Read size where sendfile(2) is not available.
    FILE_READ_SIZE = 64 * 1024

    attr_reader :io

    def initialize(io, timeout)
      @io = io
      @timeout = timeout
    end

    def write(str)
      n = @io.write_nonblock(str, exception: false)
      return if n == str.bytesize # the usual case: one syscall, no allocation

      write_rest(str, n)
    rescue ClientGone
      raise
    rescue IOError, SystemCallError => e
      raise ClientGone, "#{e.class}: #{e.message}"
    end

    # Sends length bytes of the open file from its start; returns the bytes
    # sent (fewer when the file is shorter than length).
    def write_file(file, length)
      if Narwhal.respond_to?(:sendfile_nonblock)
        sendfile(file, length)
      else
        copy_by_reading(file, length)
      end
    rescue ClientGone
      raise
    rescue IOError, SystemCallError => e
      raise ClientGone, "#{e.class}: #{e.message}"
    end

    private

    def write_rest(str, written)
      written = 0 if written == :wait_writable
      while written < str.bytesize
        wait_writable
        n = @io.write_nonblock(str.byteslice(written, str.bytesize - written), exception: false)
        written += n unless n == :wait_writable
      end
    end

    def sendfile(file, length)
      out = @io.fileno
      src = file.fileno
      sent = 0
      while sent < length
        n = Narwhal.sendfile_nonblock(out, src, sent, [FILE_SLICE, length - sent].min)
        if n.nil?
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
      return if @io.wait_writable(@timeout)

      raise WriteTimeout, "client took no data for #{@timeout}s"
    end
  end
end
