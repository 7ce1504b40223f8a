# frozen_string_literal: true

module Narwhal
  # A client that sends exact bytes and reads exact HTTP/1.1 responses, with
  # deadlines on every read.
  class RawClient
    Response = Struct.new(:status_line, :status, :headers, :body, :raw) do
      def [](name)
        headers[name.downcase]
      end
    end

    attr_reader :sock

    def initialize(sock)
      @sock = sock
      @buf = +""
    end

    def write(bytes)
      @sock.write(bytes)
      self
    end

    # Sends bytes one at a time (flushing each), as a slow client would.
    def trickle(bytes)
      @sock.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1)
      bytes.each_char { |c| @sock.write(c) }
      self
    end

    # Reads one response. head: true for a response to HEAD (no body).
    def read_response(head: false, timeout: 5)
      raw_start = @buf.bytesize
      status_line = read_line(timeout)
      headers = {}
      while (line = read_line(timeout)) != ""
        name, value = line.split(":", 2)
        key = name.downcase
        headers[key] = headers.key?(key) ? "#{headers[key]}\n#{value.strip}" : value.strip
      end
      status = Integer(status_line[/\AHTTP\/1\.[01] (\d{3})/, 1])
      body = if head || status < 200 || status == 204 || status == 304 then +""
             elsif headers["transfer-encoding"]&.include?("chunked") then read_chunked(timeout)
             elsif headers["content-length"] then read_bytes(Integer(headers["content-length"]), timeout)
             else read_to_eof(timeout)
             end
      Response.new(status_line, status, headers, body, raw_start)
    end

    # true when the server closed the connection (EOF) within timeout.
    def closed?(timeout: 5)
      return false unless @buf.empty?

      fill(timeout)
      false
    rescue EOFError, Errno::ECONNRESET
      true
    rescue Timeout::Error
      false
    end

    def read_to_eof(timeout = 5)
      loop { fill(timeout) }
    rescue EOFError, Errno::ECONNRESET
      @buf.slice!(0, @buf.bytesize)
    end

    def read_bytes(n, timeout = 5)
      fill(timeout) while @buf.bytesize < n
      @buf.slice!(0, n)
    end

    def read_line(timeout = 5)
      fill(timeout) until (i = @buf.index("\r\n"))
      line = @buf.slice!(0, i + 2)
      line.chomp("\r\n")
    end

    def close
      @sock.close unless @sock.closed?
    end

    private

    def read_chunked(timeout)
      body = +""
      loop do
        size = Integer(read_line(timeout).split(";").first, 16)
        if size.zero?
          nil until read_line(timeout).empty?
          return body
        end
        body << read_bytes(size, timeout)
        read_line(timeout)
      end
    end

    def fill(timeout)
      raise Timeout::Error, "no data within #{timeout}s" unless @sock.wait_readable(timeout)

      @buf << @sock.readpartial(65_536)
    end
  end
end
