# frozen_string_literal: true

require "json"
require "socket"

# Many slow clients from one process over non-blocking sockets. Header
# tricklers send the start of a request head, then one more byte a round,
# and never finish it. Body tricklers send a whole head announcing a large
# body, then one body byte a round for body_seconds, then nothing.
#
# For each client it records (in seconds from the start) when it connected,
# when it last sent a byte, how many it sent, when an answer or a close came
# and the answer's status code (nil for a close without one). Bounded: it
# returns after `limit` seconds whatever happened.
#
#   ruby test/support/slowloris.rb HOST PORT HEADERS BODIES BODY_SECONDS LIMIT
#
# prints "connected" once every client is connected, then the records as
# one line of JSON.
class Slowloris
  ROUND = 0.25
  HEAD_START = "GET /slow HTTP/1.1\r\nHost: x\r\nX-Slow: "
  BODY_HEAD = "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n"

  Client = Struct.new(:kind, :sock, :connected, :last_sent, :sent, :answered, :status, :reply) do
    def to_h
      { kind: kind, connected: connected, last_sent: last_sent, sent: sent, answered: answered, status: status }
    end
  end

  def initialize(host, port, headers:, bodies:, body_seconds:, limit:)
    @host = host
    @port = port
    @counts = { header: headers, body: bodies }
    @body_seconds = body_seconds
    @limit = limit
  end

  def run(on_connected: nil)
    @t0 = now
    clients = @counts.flat_map { |kind, n| Array.new(n) { connect(kind) } }
    on_connected&.call
    waiting = clients.dup
    while !waiting.empty? && elapsed < @limit
      round_end = now + ROUND
      waiting.each { |c| trickle(c) unless c.answered }
      read_answers(waiting, round_end)
      waiting.reject!(&:answered)
    end
    clients.each { |c| c.sock.close unless c.sock.closed? }
    clients.map(&:to_h)
  end

  private

  def now
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  def elapsed
    now - @t0
  end

  def connect(kind)
    sock = Socket.tcp(@host, @port, connect_timeout: 5)
    sock.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1)
    client = Client.new(kind, sock, elapsed, nil, 0, nil, nil, +"")
    send_bytes(client, kind == :header ? HEAD_START : BODY_HEAD)
    client
  end

  def trickle(client)
    return if client.kind == :body && elapsed >= @body_seconds

    send_bytes(client, client.kind == :header ? "a" : "b")
  end

  def send_bytes(client, bytes)
    return unless client.sock.write_nonblock(bytes, exception: false).is_a?(Integer)

    client.sent += bytes.bytesize
    client.last_sent = elapsed
  rescue SystemCallError, IOError
    answered(client, nil) # reset: the server is gone for this client
  end

  # Reads what came back until round_end.
  def read_answers(clients, round_end)
    socks = clients.to_h { |c| [c.sock, c] }
    while (left = round_end - now).positive?
      ready, = IO.select(socks.keys, nil, nil, left)
      break unless ready

      ready.each do |sock|
        client = socks.delete(sock)
        read(client)
      end
      break if socks.empty?
    end
  end

  def read(client)
    data = client.sock.read_nonblock(4096, exception: false)
    return if data == :wait_readable
    return answered(client, nil) if data.nil?

    client.reply << data
    status = client.reply[%r{\AHTTP/1\.1 (\d{3}) }, 1]
    answered(client, Integer(status, 10)) if status
  rescue SystemCallError, IOError
    answered(client, nil)
  end

  def answered(client, status)
    client.answered ||= elapsed
    client.status ||= status
  end
end

if $PROGRAM_NAME == __FILE__
  host, port, headers, bodies, body_seconds, limit = ARGV
  $stdout.sync = true
  loris = Slowloris.new(host, Integer(port), headers: Integer(headers), bodies: Integer(bodies),
                                             body_seconds: Float(body_seconds), limit: Float(limit))
  records = loris.run(on_connected: -> { puts "connected" })
  puts JSON.generate(records)
end
