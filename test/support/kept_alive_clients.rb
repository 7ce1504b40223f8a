# frozen_string_literal: true

module Narwhal
  # Clients that each keep one connection open and POST on it every
  # `pause` seconds, as a proxy's upstream pool does: a connection answered
  # with `connection: close`, or idle longer than the `keep-alive: timeout`
  # the server advertised, is replaced by a new one. A request that was
  # sent and got no response (EOF, reset) is lost: for a POST a proxy would
  # answer 502. The clients do not look for an EOF before they send: a
  # close that races a request must not happen, not be dodged. With
  # refusals: true a connect that fails (the server stopped listening) is
  # counted as refused, not lost: no request was sent, and the client tries
  # again; otherwise it ends the client's thread, and #stop raises it.
  class KeptAliveClients
    Results = Struct.new(:ok, :lost, :failed, :closes, :refused)
    Conn = Struct.new(:client, :idle_limit, :last_response)

    # connect: returns a new connected socket.
    def initialize(count: 4, pause: 0.05, path: "/", refusals: false, &connect)
      @count = count
      @refusals = refusals
      @pause = pause
      @path = path
      @connect = connect
      @stop = false
      @results = Results.new(0, [], [], 0, 0)
      @lock = Mutex.new
      @threads = []
    end

    def start
      @threads = Array.new(@count) { |i| Thread.new { run(i) } }
      self
    end

    def sent
      @lock.synchronize { @results.ok + @results.lost.size + @results.failed.size }
    end

    # Stops the loops (each finishes the request it is in) and returns Results.
    def stop
      @stop = true
      @threads.each { |t| t.join(30) || t.kill }
      @results
    end

    private

    def run(index)
      conn = nil
      seq = 0
      until @stop
        conn = nil if conn && expired?(conn)
        conn ||= open
        if conn
          body = "client=#{index} seq=#{seq += 1}"
          conn = post(conn, body)
        end
        sleep @pause # the pace of the load, not a synchronisation
      end
    ensure
      conn&.client&.close
    end

    # A new connection, or nil when the connect failed.
    def open
      Conn.new(RawClient.new(@connect.call), nil, nil)
    rescue SystemCallError
      raise unless @refusals

      @lock.synchronize { @results.refused += 1 }
      nil
    end

    # Returns the connection to use next (nil: open a new one).
    def post(conn, body)
      client = conn.client
      client.write("POST #{@path} HTTP/1.1\r\nHost: test\r\ncontent-type: text/plain\r\n" \
                   "content-length: #{body.bytesize}\r\n\r\n#{body}")
      response = client.read_response(timeout: 20)
      record(response.status == 200 && response.body == body ? :ok : [:failed, "#{response.status} #{response.body}"])
      if response["connection"]&.casecmp?("close")
        @lock.synchronize { @results.closes += 1 }
        client.close
        return nil
      end
      conn.idle_limit = response["keep-alive"].to_s[/timeout=(\d+)/, 1]&.to_i
      conn.last_response = now
      conn
    rescue SystemCallError, IOError, Timeout::Error => e
      record([:lost, "#{e.class}: #{e.message} (#{body})"])
      client.close
      nil
    end

    # Idle past the timeout the server advertised: not to be reused.
    def expired?(conn)
      return false unless conn.idle_limit && now - conn.last_response >= conn.idle_limit

      conn.client.close
      true
    end

    def now
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end

    def record(outcome)
      @lock.synchronize do
        if outcome == :ok
          @results.ok += 1
        else
          (outcome.first == :lost ? @results.lost : @results.failed) << outcome.last
        end
      end
    end
  end
end
