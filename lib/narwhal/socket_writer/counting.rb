# frozen_string_literal: true

module Narwhal
  class SocketWriter
    # A SocketWriter that counts the bytes taken for the client on its
    # connection, sent or spooled: the access log's count. A class of its
    # own so that without the log no write pays for counting.
    class Counting < SocketWriter
      attr_reader :sent

      def initialize(io, timeout, budget = nil, io_class = nil)
        super
        @sent = 0
      end

      def write(str)
        @sent += str.bytesize
        super
      end

      # What it returns is what went (a file read and written goes through
      # #write as well: counted once, here).
      def write_file(file, length)
        before = @sent
        n = super
        @sent = before + n
        n
      end
    end
  end
end
