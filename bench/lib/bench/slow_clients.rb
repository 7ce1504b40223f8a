# frozen_string_literal: true

module Bench
  # Connections that send their request a byte at a time, as clients on bad
  # mobile links do: some never finish their headers, some their bodies.
  # Runs in a child process until stopped; reports how many connections the
  # server closed on it.
  class SlowClients
    TRICKLE_INTERVAL = 1.0
    BODY_LENGTH = 1_000_000
    HEADER_START = "GET / HTTP/1.1\r\nHost: #{HOST}\r\nX-Trickle: ".freeze
    BODY_START = "POST / HTTP/1.1\r\nHost: #{HOST}\r\nContent-Type: text/plain\r\n" \
                 "Content-Length: #{BODY_LENGTH}\r\n\r\n".freeze

    def initialize(port, headers:, bodies:)
      @port = port
      @headers = headers
      @bodies = bodies
    end

    # Opens every connection before returning, so the load is in place
    # when the measurement starts.
    def start
      reader, writer = IO.pipe
      ready_r, ready_w = IO.pipe
      @pid = fork do
        reader.close
        ready_r.close
        writer.write(Marshal.dump(trickle(ready_w)))
        exit!(0)
      end
      writer.close
      ready_w.close
      @reader = reader
      opened = ready_r.read.to_i
      ready_r.close
      opened
    end

    def stop
      Process.kill("TERM", @pid)
      result = Marshal.load(@reader.read) # rubocop:disable Security/MarshalLoad -- our own child's output
      Process.wait(@pid)
      result
    end

    private

    def trickle(ready)
      stop = false
      Signal.trap("TERM") { stop = true }
      socks = Array.new(@headers) { open(HEADER_START) } + Array.new(@bodies) { open(BODY_START) }
      opened = socks.compact.size
      ready.write(opened.to_s)
      ready.close
      closed = 0
      until stop
        sleep TRICKLE_INTERVAL
        socks.each_with_index do |s, i|
          s&.write_nonblock("a", exception: false)
        rescue SystemCallError, IOError
          s.close
          socks[i] = nil
          closed += 1
        end
      end
      { "slow_connections" => opened, "closed_by_server" => closed + (@headers + @bodies - opened) }
    end

    def open(start)
      s = Socket.tcp(HOST, @port, connect_timeout: 5)
      s.write(start)
      s
    rescue SystemCallError
      nil
    end
  end
end
