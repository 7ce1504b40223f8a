# frozen_string_literal: true

module Bench
  # A closed-loop client that times every request itself, so that fast and
  # slow requests can be told apart (wrk reports one histogram for all).
  # Each client is its own process (no GVL shared between clients) and opens
  # a new connection per request, as a proxy in front of the server does.
  class LatencyClient
    REQUEST = "GET %s HTTP/1.1\r\nHost: #{HOST}\r\nConnection: close\r\n\r\n"
    # Every SLOW_EVERY-th request of each client is slow: 2%.
    SLOW_EVERY = 50
    READ_TIMEOUT = 10

    def initialize(port, clients:, seconds:)
      @port = port
      @clients = clients
      @seconds = seconds
    end

    def run
      readers = Array.new(@clients) { |i| spawn_client(i) }
      samples = readers.map do |pid, reader|
        data = reader.read
        Process.wait(pid)
        Marshal.load(data) # rubocop:disable Security/MarshalLoad -- our own child's output
      end
      summarize(samples)
    end

    private

    def spawn_client(index)
      reader, writer = IO.pipe
      pid = fork do
        reader.close
        writer.write(Marshal.dump(client_loop(index)))
        exit!(0)
      end
      writer.close
      [pid, reader]
    end

    # Offsets spread the slow requests of different clients over time.
    def client_loop(index)
      fast = []
      slow = []
      errors = 0
      n = index * 7
      deadline = Bench.now + @seconds
      while Bench.now < deadline
        n += 1
        is_slow = (n % SLOW_EVERY).zero?
        started = Bench.now
        if request(is_slow ? "/slow" : "/")
          (is_slow ? slow : fast) << (Bench.now - started) * 1000.0
        else
          errors += 1
        end
      end
      { fast: fast, slow: slow, errors: errors }
    end

    def request(path)
      sock = Socket.tcp(HOST, @port, connect_timeout: READ_TIMEOUT)
      sock.write(format(REQUEST, path))
      response = +""
      while sock.wait_readable(READ_TIMEOUT)
        chunk = sock.read_nonblock(16_384, exception: false)
        break if chunk.nil?

        response << chunk unless chunk == :wait_readable
      end
      response.start_with?("HTTP/1.1 200", "HTTP/1.0 200")
    rescue SystemCallError, IOError
      false
    ensure
      sock&.close
    end

    def summarize(samples)
      fast = samples.flat_map { |s| s[:fast] }.sort
      slow = samples.flat_map { |s| s[:slow] }.sort
      round = ->(v) { v&.round(3) }
      {
        "rps" => ((fast.size + slow.size) / @seconds.to_f).round(1),
        "requests" => fast.size + slow.size,
        "p50_ms" => round.call(Bench.percentile(fast, 50)),
        "p99_ms" => round.call(Bench.percentile(fast, 99)),
        "p999_ms" => round.call(Bench.percentile(fast, 99.9)),
        "stdev_ms" => round.call(Bench.stdev(fast)),
        "slow_p50_ms" => round.call(Bench.percentile(slow, 50)),
        "slow_requests" => slow.size,
        "errors" => samples.sum { |s| s[:errors] },
        "command" => "#{@clients} client processes, Connection: close, #{@seconds} s, " \
                     "every #{SLOW_EVERY}th request of each client to /slow"
      }
    end
  end
end
