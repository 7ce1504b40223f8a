# frozen_string_literal: true

require "socket"

module Narwhal
  # Open-loop load: requests sent at a fixed rate, each on a new
  # connection, whether or not the earlier ones were answered (as users
  # arrive), so that a server slower than the rate builds a queue. One
  # thread sends, one reads every answer as it comes. Bounded by count and
  # by a deadline per answer. #run sends all and waits; #start sends in the
  # background (steady load while a test changes the server) until #stop
  # or the count.
  class OpenLoop
    # One request: when it was sent, its status (nil: no answer, reset or
    # timed out, and `error` says which), when the answer was complete, and
    # its body.
    Result = Struct.new(:sent, :status, :answered, :body, :head, :error) do
      def latency
        answered && answered - sent
      end
    end

    # How many requests got their whole answer so far.
    attr_reader :answers

    def initialize(host, port, path: "/", rate:, count:, answer_timeout: 30)
      @host = host
      @port = port
      @request = "GET #{path} HTTP/1.1\r\nHost: load\r\nConnection: close\r\n\r\n"
      @interval = 1.0 / rate
      @count = count
      @answer_timeout = answer_timeout
      @answers = 0
      @stopping = false
    end

    # Sends every request and waits for every answer; the results in
    # sending order.
    def run
      start.results
    end

    # Starts sending in the background; returns self.
    def start
      pending = Queue.new
      @sender = Thread.new { send_all(pending) }
      @reader = Thread.new { read_all(pending) }
      self
    end

    # Sends no more requests, waits for the answers to those sent: the
    # results in sending order.
    def stop
      @stopping = true
      results
    end

    # Waits for the count to be sent and every answer (or its deadline).
    def results
      @sender.join
      @reader.value
    end

    private

    def now
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end

    def send_all(pending)
      start = now
      @count.times do |i|
        break if @stopping

        delay = start + (i * @interval) - now
        sleep delay if delay.positive? # the schedule, not a synchronisation
        result = Result.new(now)
        begin
          sock = Socket.tcp(@host, @port, connect_timeout: @answer_timeout)
          sock.write(@request)
        rescue SystemCallError, IOError => e
          result.error = e.class.name
          sock&.close
          sock = nil
        end
        pending << [result, sock]
      end
      pending << nil
    end

    # Every socket's whole answer (the server closes each), read as it comes.
    def read_all(pending)
      results = []
      open = {} # socket => [result, bytes]
      done = false
      until done && open.empty?
        done = take_new(pending, results, open) unless done
        ready, = IO.select(open.keys, nil, nil, 0.005)
        ready&.each { |sock| read_some(sock, open) }
        expire(open)
      end
      results
    end

    def take_new(pending, results, open)
      until pending.empty?
        item = pending.pop
        return true if item.nil?

        result, sock = item
        results << result
        open[sock] = [result, +""] if sock
      end
      false
    end

    def read_some(sock, open)
      result, bytes = open[sock]
      chunk = sock.read_nonblock(16_384, exception: false)
      return if chunk == :wait_readable

      if chunk
        bytes << chunk
        return
      end
      finish(sock, open, result, bytes)
    rescue SystemCallError, IOError => e
      result.error = e.class.name
      finish(sock, open, result, bytes)
    end

    def finish(sock, open, result, bytes)
      open.delete(sock)
      sock.close
      head, body = bytes.split("\r\n\r\n", 2)
      status = head && head[%r{\AHTTP/1\.[01] (\d{3})}, 1]
      return result.error ||= "closed with no answer" unless status

      result.status = Integer(status)
      result.error = nil # the answer came: a reset after it is not a failure
      result.head = head
      result.body = body
      result.answered = now
      @answers += 1 # this thread only
    end

    def expire(open)
      limit = now - @answer_timeout
      open.select { |_, (result, _)| result.sent < limit }.each do |sock, (result, _)|
        result.error = "no answer in #{@answer_timeout}s"
        open.delete(sock)
        sock.close
      end
    end
  end
end
