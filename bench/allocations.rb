# frozen_string_literal: true

# Ruby objects narwhal allocates per request for examples/hello.ru.
#
#   ruby bench/allocations.rb
#   ruby bench/allocations.rb --request browser   # a request with typical browser headers
#   ruby bench/allocations.rb --request close     # a new connection per request
#   ruby bench/allocations.rb --ruby-opt=--yjit
#   ruby bench/allocations.rb --access-log json    # with access_log on (combined or json)
#   ruby bench/allocations.rb --load-report        # with orca_load_report on
#
# Starts the real server (`narwhal -E production`) on bench/alloc_app.ru,
# which is hello.ru behind a counter that reads
# GC.stat(:total_allocated_objects) at request 1,000 and request 11,000 and
# then traces every allocation of 100 more requests (GC disabled meanwhile).
# A separate client process sends the requests over keep-alive connections
# (reconnecting when the server closes one after keepalive_requests), so the
# numbers include everything the server does per request, amortised
# connection set-up included. Traffic goes to 127.0.0.1 only.

require "json"
require "optparse"
require "socket"
require "tmpdir"

module Bench
  # A minimal HTTP/1.1 keep-alive client: sends the same request n times,
  # reading each response by its Content-Length, reconnecting after a close.
  class KeepAliveClient
    def initialize(port, request)
      @port = port
      @request = request
    end

    def run(n)
      connections = 0
      sock = nil
      n.times do
        unless sock
          sock = TCPSocket.new("127.0.0.1", @port)
          connections += 1
          @buf = +""
        end
        sock.write(@request)
        head = read_head(sock)
        raise "unexpected response: #{head.lines.first.inspect}" unless head.start_with?("HTTP/1.1 200 ")

        length = head[/^content-length: *(\d+)/i, 1] or raise "no content-length:\n#{head}"
        read_exact(sock, Integer(length, 10))
        next unless head.match?(/^connection: *close/i)

        sock.close
        sock = nil
      end
      sock&.close
      connections
    end

    private

    def read_head(sock)
      until (i = @buf.index("\r\n\r\n"))
        @buf << sock.readpartial(16_384)
      end
      @buf.slice!(0, i + 4)
    end

    def read_exact(sock, n)
      @buf << sock.readpartial(16_384) while @buf.bytesize < n
      @buf.slice!(0, n)
    end
  end

  # Runs the server and the client; prints what the server allocated.
  class Allocations
    ROOT = File.expand_path("..", __dir__)
    REQUESTS = {
      # what wrk sends (bench/hello.rb)
      "wrk" => "GET / HTTP/1.1\r\nHost: 127.0.0.1:%<port>d\r\n\r\n",
      # a new connection per request (wrk -H 'Connection: close')
      "close" => "GET / HTTP/1.1\r\nHost: 127.0.0.1:%<port>d\r\nConnection: close\r\n\r\n",
      "browser" => "GET /index.html?q=1 HTTP/1.1\r\nHost: 127.0.0.1:%<port>d\r\n" \
                   "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0\r\n" \
                   "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n" \
                   "Accept-Language: en-US,en;q=0.5\r\nAccept-Encoding: gzip, deflate, br\r\n" \
                   "Connection: keep-alive\r\nCookie: session=abc123; theme=dark\r\n" \
                   "Upgrade-Insecure-Requests: 1\r\nSec-Fetch-Dest: document\r\n" \
                   "Sec-Fetch-Mode: navigate\r\nSec-Fetch-Site: none\r\nPriority: u=0, i\r\n\r\n"
    }.freeze

    def initialize(opts)
      @opts = opts
    end

    def run
      Dir.mktmpdir("narwhal-alloc-") do |tmp|
        out = File.join(tmp, "result.json")
        port = free_port
        log = File.join(tmp, "server.log")
        server = spawn_server(port, out, log, tmp)
        begin
          wait_ready(server, port, log)
          # every worker must reach the last mark (calls.rb --workers)
          total = (@opts[:to] * @opts.fetch(:workers, nil).to_i.clamp(1, nil)) + @opts[:sample].to_i
          client = Process.spawn(RbConfig.ruby, __FILE__, "--client", port.to_s, total.to_s, @opts[:request],
                                 chdir: ROOT)
          _, status = Process.wait2(client)
          raise "client failed (#{status.inspect}); server log:\n#{File.read(log)}" unless status.success?

          wait_for(out, log)
          print_report(JSON.parse(File.read(out)))
        ensure
          stop(server)
        end
      end
    end

    private

    def spawn_server(port, out, log, tmp)
      env = { "BUNDLE_GEMFILE" => File.join(ROOT, "bench", "Gemfile") }.merge(app_env(out))
      env["RUBYOPT"] = [ENV.fetch("RUBYOPT", nil), @opts[:ruby_opt]].compact.join(" ") if @opts[:ruby_opt]
      config = []
      lines = config_lines(tmp)
      unless lines.empty?
        File.write(File.join(tmp, "narwhal.rb"), lines.map { |l| "#{l}\n" }.join)
        config = ["-c", File.join(tmp, "narwhal.rb")]
      end
      Process.spawn(env, "bundle", "exec", "narwhal", "-E", "production", "-l", "127.0.0.1:#{port}", *config,
                    File.join(ROOT, "bench", app_file),
                    chdir: ROOT, in: File::NULL, out: log, err: %i[child out])
    end

    # The counting app and what it is told through its environment.
    def app_file
      "alloc_app.ru"
    end

    def app_env(out)
      { "ALLOC_FROM" => @opts[:from].to_s, "ALLOC_TO" => @opts[:to].to_s,
        "ALLOC_SAMPLE" => @opts[:sample].to_s, "ALLOC_OUT" => out }
    end

    # narwhal config directives for the run (none: narwhal's defaults).
    def config_lines(tmp)
      lines = []
      lines << "access_log #{File.join(tmp, 'access.log').inspect}, format: :#{@opts[:access_log]}" if @opts[:access_log]
      lines << "orca_load_report true" if @opts[:load_report]
      lines
    end

    def free_port
      s = TCPServer.new("127.0.0.1", 0)
      s.addr[1]
    ensure
      s&.close
    end

    def now
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end

    def wait_ready(pid, port, log)
      deadline = now + 30
      loop do
        raise "server exited:\n#{File.read(log)}" if Process.waitpid(pid, Process::WNOHANG)

        begin
          Socket.tcp("127.0.0.1", port, connect_timeout: 1).close
          return
        rescue SystemCallError
          raise "server not listening after 30 s:\n#{File.read(log)}" if now > deadline

          IO.select(nil, nil, nil, 0.02)
        end
      end
    end

    # The app writes the file while serving the last counted request.
    def wait_for(path, log)
      deadline = now + 30
      IO.select(nil, nil, nil, 0.02) until File.exist?(path) || now > deadline
      raise "no result from the server:\n#{File.read(log)}" unless File.exist?(path)
    end

    def stop(pid)
      Process.kill("TERM", pid)
      Process.wait(pid)
    rescue Errno::ESRCH, Errno::ECHILD
      nil
    end

    def print_report(r)
      per = r["allocated"].fdiv(r["requests"])
      n = r["sample_requests"]
      puts "narwhal, examples/hello.ru, request: #{@opts[:request]}, #{r['ruby']}" \
           "#{' +YJIT' if r['yjit']}#{", access_log :#{@opts[:access_log]}" if @opts[:access_log]}" \
           "#{', orca_load_report' if @opts[:load_report]}"
      puts
      how = @opts[:request] == "close" ? "a connection per request" : "keep-alive"
      puts format("**%.2f objects/request** (GC.stat(:total_allocated_objects) over requests %d..%d, %s)",
                  per, @opts[:from], @opts[:to], how)
      puts
      puts "Traced over #{n} further requests (per request):"
      puts
      puts "| by type (ObjectSpace.count_objects, incl. hidden) | per request |"
      puts "|---|---:|"
      r["by_type"].sort_by { |_, v| -v }.each { |k, v| puts format("| %s | %.2f |", k, v.fdiv(n)) }
      puts
      puts "| by class (visible objects) | per request |"
      puts "|---|---:|"
      r["by_class"].sort_by { |_, v| -v }.each { |k, v| puts format("| %s | %.2f |", k, v.fdiv(n)) }
      puts
      puts "| allocation site | per request |"
      puts "|---|---:|"
      r["by_site"].sort_by { |_, v| -v }.first(@opts[:sites]).each do |site, v|
        puts format("| %s | %.2f |", site.gsub(%r{\S*/gems/}, "").sub("#{ROOT}/", ""), v.fdiv(n))
      end
    end
  end

  def self.allocation_options(argv)
    opts = { from: 1_000, to: 11_000, sample: 100, request: "wrk", sites: 25, ruby_opt: nil, access_log: nil }
    OptionParser.new do |o|
      o.banner = "Usage: ruby bench/allocations.rb [options]"
      o.on("--from N", Integer, "first mark (1000)") { |v| opts[:from] = v }
      o.on("--to N", Integer, "second mark (11000)") { |v| opts[:to] = v }
      o.on("--sample N", Integer, "requests traced by class and site (100)") { |v| opts[:sample] = v }
      o.on("--request NAME", Allocations::REQUESTS.keys, "request sent: wrk (default), close or browser") do |v|
        opts[:request] = v
      end
      o.on("--sites N", Integer, "allocation sites listed (25)") { |v| opts[:sites] = v }
      o.on("--ruby-opt OPTS", "extra RUBYOPT for the server, e.g. --yjit") { |v| opts[:ruby_opt] = v }
      o.on("--access-log FORMAT", %w[combined json], "with access_log on: combined or json") do |v|
        opts[:access_log] = v
      end
      o.on("--load-report", "with orca_load_report on") { opts[:load_report] = true }
    end.parse!(argv)
    opts
  end
end

if $PROGRAM_NAME == __FILE__
  if ARGV.first == "--client"
    _, port, n, name = ARGV
    request = format(Bench::Allocations::REQUESTS.fetch(name), port: Integer(port))
    Bench::KeepAliveClient.new(Integer(port), request).run(Integer(n))
  else
    Bench::Allocations.new(Bench.allocation_options(ARGV)).run
  end
end
