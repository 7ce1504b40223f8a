# frozen_string_literal: true

module Bench
  # The fast client beside held connections: +requests+ requests spread
  # evenly over +seconds+ (each sent on time, or at once when the previous
  # one ran late), one at a time, a new connection each, each given
  # +timeout+ s. A failed request counts in the latencies with the time it
  # took to fail, one never sent because time ran out with the timeout: a
  # server that answers nothing has a p99 of the timeout, not none.
  class ProbeClient
    REQUEST = "GET / HTTP/1.1\r\nHost: #{HOST}\r\nConnection: close\r\n\r\n"

    def initialize(port, requests:, seconds:, timeout:)
      @port = port
      @requests = requests
      @seconds = seconds
      @timeout = timeout
    end

    def run
      started = Bench.now
      # Past this, stragglers would only stretch the run: the rest count as timed out.
      stop_at = started + @seconds + 2 * @timeout
      times = []
      answered = 0
      @requests.times do |i|
        wait = started + i * @seconds.fdiv(@requests) - Bench.now
        sleep wait if wait.positive?
        break if Bench.now > stop_at

        t0 = Bench.now
        answered += 1 if request
        times << (Bench.now - t0) * 1000.0
      end
      summarize(times, answered, Bench.now - started)
    end

    private

    def request
      deadline = Bench.now + @timeout
      sock = Socket.tcp(HOST, @port, connect_timeout: @timeout)
      sock.write(REQUEST)
      response = +""
      while (left = deadline - Bench.now).positive? && sock.wait_readable(left)
        chunk = sock.read_nonblock(16_384, exception: false)
        break if chunk.nil?

        response << chunk unless chunk == :wait_readable
      end
      response.start_with?("HTTP/1.1 200", "HTTP/1.0 200") && response.include?("Hello, Rack!")
    rescue SystemCallError, IOError
      false
    ensure
      sock&.close
    end

    def summarize(times, answered, elapsed)
      all = (times + [@timeout * 1000.0] * (@requests - times.size)).sort
      round = ->(v) { v&.round(3) }
      {
        "requests" => @requests, "answered" => answered, "errors" => @requests - answered,
        "p50_ms" => round.call(Bench.percentile(all, 50)), "p99_ms" => round.call(Bench.percentile(all, 99)),
        "max_ms" => round.call(all.last), "probe_s" => elapsed.round(2),
        "command" => "#{@requests} requests over #{@seconds} s, one at a time, Connection: close, " \
                     "#{@timeout} s timeout each"
      }
    end
  end
end
