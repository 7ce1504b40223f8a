# frozen_string_literal: true

# Random byte streams a client might send on one connection: pipelined
# requests of every kind the server tells apart (no body, Content-Length,
# chunked, Expect: 100-continue, queue stamps, HTTP/1.0, Connection: close,
# leading empty lines, malformed lines, oversized heads), and the read
# sizes they arrive in. Deterministic for a given Random.
class RequestStream
  PATHS = %w[/ /plain /each /raise /big /callbacks /hijack /head204 /bad_header /string_status].freeze
  METHODS = %w[GET GET GET HEAD POST PUT DELETE].freeze

  def initialize(random)
    @r = random
  end

  def bytes
    out = +""
    @r.rand(1..6).times { out << request }
    out << garbage if @r.rand(8).zero?
    out.b
  end

  # Sizes that add up to total: mostly small, some whole.
  def splits(total)
    sizes = []
    left = total
    while left.positive?
      n = @r.rand(4).zero? ? left : [@r.rand(1..64), left].min
      sizes << n
      left -= n
    end
    sizes
  end

  private

  def request
    method = METHODS.sample(random: @r)
    path = PATHS.sample(random: @r)
    path += "?q=#{@r.rand(100)}" if @r.rand(3).zero?
    version = @r.rand(10).zero? ? "HTTP/1.0" : "HTTP/1.1"
    head = +""
    head << "\r\n" if @r.rand(10).zero? # allowed before a request line
    head << "#{method} #{path} #{version}\r\n"
    head << "Host: example.com\r\n" unless @r.rand(12).zero?
    head << "Connection: close\r\n" if @r.rand(10).zero?
    head << "X-Request-Start: t=#{(Time.now.to_f * 1000).to_i}\r\n" if @r.rand(10).zero?
    head << "X-Big: #{'a' * 5000}\r\n" if @r.rand(25).zero?
    head << "Bad Header\r\n" if @r.rand(25).zero?
    head << "#{head_field}\r\n" if @r.rand(3).zero?
    body = ""
    case @r.rand(6)
    when 0
      body = "x" * @r.rand(0..40)
      head << "Content-Length: #{body.bytesize}\r\n"
    when 1
      chunks = Array.new(@r.rand(0..3)) { "y" * @r.rand(1..10) }
      head << "Transfer-Encoding: chunked\r\n"
      body = chunks.map { |c| "#{c.bytesize.to_s(16)}\r\n#{c}\r\n" }.join << "0\r\n\r\n"
    when 2
      body = "z" * @r.rand(1..20)
      head << "Content-Length: #{body.bytesize}\r\nExpect: 100-continue\r\n"
    end
    "#{head}\r\n#{body}"
  end

  def head_field
    ["Accept: */*", "X_Under: 1", "Cookie: a=b", "User-Agent: fuzz/#{@r.rand(9)}", "X-Empty:"].sample(random: @r)
  end

  def garbage
    Array.new(@r.rand(1..20)) { @r.rand(256).chr }.join
  end
end
