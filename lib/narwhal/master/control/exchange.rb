# frozen_string_literal: true

module Narwhal
  class Master
    class Control
      # The control listener's HTTP/1.x: one request per connection, its head
      # read within READ_DEADLINE and MAX_REQUEST bytes, its answer (always
      # Connection: close) taken within WRITE_DEADLINE; a client past its
      # deadline is dropped.
      module Exchange
        REQUEST_LINE = %r{\A([A-Z]+) (\S+) HTTP/1\.[01]\r?\n}
        # One connection: what it sent, what it is sent, by when.
        Client = Struct.new(:io, :input, :output, :deadline)

        REASONS = { 200 => "OK", 400 => "Bad Request", 404 => "Not Found", 405 => "Method Not Allowed",
                    431 => "Request Header Fields Too Large", 500 => "Internal Server Error",
                    503 => "Service Unavailable" }.freeze

        private

        def read(client)
          return unless client

          data = client.io.read_nonblock(MAX_REQUEST, exception: false)
          return if data == :wait_readable
          return drop(client) if data.nil? # gone before asking

          client.input << data
          parse(client)
        rescue SystemCallError, IOError
          drop(client)
        end

        # A complete head gets its answer; a first line that is no request
        # line gets 400 at once, a head past MAX_REQUEST 431.
        def parse(client)
          input = client.input
          if input.include?("\n") && !input.match?(REQUEST_LINE)
            respond(client, "GET", 400, { "content-type" => "text/plain" }, "bad request\n")
          elsif input.include?("\r\n\r\n") || input.include?("\n\n")
            method, target = input[REQUEST_LINE].split(" ", 3)
            respond(client, method, *answering(method, target))
          elsif input.bytesize >= MAX_REQUEST
            respond(client, "GET", 431, { "content-type" => "text/plain" }, "request too large\n")
          end
        end

        # The route's answer (Control#answer); one it fails to make (a status
        # that cannot be read) is a 500, logged, and the listener goes on.
        def answering(method, target)
          answer(method, target)
        rescue StandardError => e
          @logger.error("control #{method} #{target}: #{ErrorMessage.for(e)}#{ErrorMessage.backtrace(e)}")
          [500, { "content-type" => "text/plain" }, "internal error\n"]
        end

        def respond(client, method, code, headers, body)
          body = "" if method == "HEAD"
          head = +"HTTP/1.1 #{code} #{REASONS.fetch(code)}\r\n"
          headers.merge("content-length" => body.bytesize.to_s, "connection" => "close").each do |k, v|
            head << k << ": " << v << "\r\n"
          end
          client.output = "#{head}\r\n#{body}".b
          client.deadline = Clock.now + WRITE_DEADLINE
          write(client)
        rescue StandardError => e
          @logger.error("control #{method}: #{ErrorMessage.for(e)}#{ErrorMessage.backtrace(e)}")
          client.output = "HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".b
        end

        def write(client)
          return unless client

          written = client.io.write_nonblock(client.output, exception: false)
          return if written == :wait_writable

          client.output = client.output.byteslice(written..)
          drop(client) if client.output.empty?
        rescue SystemCallError, IOError
          drop(client)
        end

        def expire
          now = Clock.now
          @clients.values.each { |client| drop(client) if client.deadline <= now }
        end

        def drop(client)
          return unless client

          @clients.delete(client.io)
          client.io.close unless client.io.closed?
        end
      end
    end
  end
end
