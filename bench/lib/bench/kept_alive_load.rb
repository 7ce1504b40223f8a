# frozen_string_literal: true

module Bench
  # Kept-alive connections sending requests back to back, each on its own
  # thread of a child process, that tell a request the server lost from a
  # connection it refused. Lost: a request written on an open connection
  # that got no complete 2xx response (the connection closed or reset under
  # it, it timed out, or a proxy answered 5xx). Refused: a connect that
  # failed (no server listening any more: nothing was sent, nothing lost).
  # A response with `Connection: close` ends its connection without loss.
  class KeptAliveLoad
    # POST: a proxy never passes a request that is not idempotent to a second
    # backend once it has sent it to one, so a request lost behind a proxy
    # shows as a 502 rather than being retried out of sight.
    REQUEST = "POST / HTTP/1.1\r\nHost: #{HOST}\r\nContent-Length: 0\r\n\r\n"
    REQUEST_TIMEOUT = 10
    # After a refused connect: the server is gone, do not spin.
    RETRY_PAUSE = 0.01
    OUTCOMES = %w[answered lost_closed lost_timeout lost_status refused].freeze

    def initialize(port, connections:)
      @port = port
      @connections = connections
    end

    def start
      @result_r, result_w = IO.pipe
      @stop_r, @stop_w = IO.pipe
      @pid = fork do
        @result_r.close
        @stop_w.close
        result_w.write(Marshal.dump(run))
        exit!(0)
      rescue StandardError => e
        warn "kept-alive load: #{e.class}: #{e.message}"
        exit!(1)
      end
      [result_w, @stop_r].each(&:close)
      self
    end

    def stop
      @stop_w.close
      data = @result_r.read
      Process.wait(@pid)
      raise "the kept-alive load failed (#{$?.inspect})" if data.empty?

      counts = Marshal.load(data) # rubocop:disable Security/MarshalLoad -- our own child's output
      lost = counts.values_at("lost_closed", "lost_timeout", "lost_status").sum
      counts.merge("errors" => lost, "requests" => counts["answered"] + lost,
                   "command" => "#{@connections} kept-alive connections, one thread each, POST back to back")
    end

    private

    def run
      threads = Array.new(@connections) { Thread.new { connection_loop } }
      @stop_r.read # until the parent closes its end
      @stop = true
      threads.map(&:value).each_with_object(Hash.new(0)) { |c, sum| c.each { |k, v| sum[k] += v } }
        .then { |sum| OUTCOMES.to_h { |k| [k, sum[k]] } }
    end

    def connection_loop
      counts = Hash.new(0)
      exchange = nil
      until @stop
        exchange ||= connect(counts)
        next unless exchange

        outcome = exchange.request
        counts[outcome] += 1
        next if outcome == "answered" && !exchange.closing?

        exchange.close
        exchange = nil
      end
      exchange&.close
      counts
    end

    def connect(counts)
      Exchange.new(Socket.tcp(HOST, @port, connect_timeout: 5))
    rescue SystemCallError
      counts["refused"] += 1
      sleep RETRY_PAUSE
      nil
    end

    # One connection's requests, one at a time.
    class Exchange
      def initialize(sock)
        @sock = sock
        @buf = +""
        @closing = false
      end

      # The response said `Connection: close`.
      def closing?
        @closing
      end

      def close
        @sock.close
      end

      # One request and its response; the outcome's name.
      def request
        deadline = Bench.now + REQUEST_TIMEOUT
        @sock.write(REQUEST)
        head_end = read_until(deadline) { @buf.index("\r\n\r\n") }
        return head_end if head_end.is_a?(String)

        head = @buf.slice!(0, head_end + 4)
        length = head[/^content-length:\s*(\d+)/i, 1].to_i
        body = read_until(deadline) { @buf.bytesize >= length || nil }
        return body if body.is_a?(String)

        @buf.slice!(0, length)
        @closing = head.match?(/^connection:\s*close/i)
        head.start_with?("HTTP/1.1 2", "HTTP/1.0 2") ? "answered" : "lost_status"
      rescue SystemCallError, IOError
        "lost_closed"
      end

      private

      # Reads until the block is truthy (returns its value), or returns the
      # outcome of the connection ending first.
      def read_until(deadline)
        until (found = yield)
          left = deadline - Bench.now
          return "lost_timeout" unless left.positive? && @sock.wait_readable(left)

          chunk = @sock.read_nonblock(16_384, exception: false)
          return "lost_closed" if chunk.nil?

          @buf << chunk unless chunk == :wait_readable
        end
        found
      end
    end
  end
end
