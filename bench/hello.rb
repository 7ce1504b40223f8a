# frozen_string_literal: true

# Side-by-side throughput of examples/hello.ru on narwhal, puma and unicorn.
#
#   ruby bench/hello.rb                      # full run: 3 interleaved runs x 10 s
#   ruby bench/hello.rb -d 2 -r 1            # quick run
#   ruby bench/hello.rb -s narwhal,puma -m keepalive
#   ruby bench/hello.rb -s narwhal,narwhal+yjit  # interleaved with/without YJIT
#
# Every measurement starts the server in a fresh process, waits until its
# port accepts connections, warms it up with wrk, measures with
# `wrk -t2 -c16 -dNs --latency` and stops the server by pid. Servers are
# interleaved (A B C A B C ...) so that drift of the machine hits all alike.
# Prints a Markdown table per mode and writes the raw results as JSON to
# bench/results/<date>-hello.json. Traffic goes to 127.0.0.1 only.

require "digest"
require "etc"
require "fileutils"
require "json"
require "optparse"
require "rbconfig"
require "socket"
require "time"
require "tmpdir"

module Bench
  ROOT = File.expand_path("..", __dir__)
  GEMFILE = File.join(ROOT, "bench", "Gemfile")
  APP = File.join(ROOT, "examples", "hello.ru")
  HOST = "127.0.0.1"
  SERVERS = %w[narwhal puma unicorn].freeze
  MODES = %w[keepalive close].freeze
  UNICORN_CONFIG = <<~RUBY
    worker_processes 1
    stderr_path "/dev/null"
    stdout_path "/dev/null"
  RUBY

  # Runs the servers, one fresh process per measurement.
  class Hello
    def initialize(opts)
      @opts = opts
      @tmp = Dir.mktmpdir("narwhal-bench-")
      File.write(File.join(@tmp, "unicorn.conf.rb"), UNICORN_CONFIG)
      @results = []
    end

    def run
      check_tools
      total = @opts[:runs] * @opts[:modes].size * @opts[:servers].size
      i = 0
      @opts[:runs].times do |run|
        @opts[:modes].each do |mode|
          @opts[:servers].each do |server|
            i += 1
            $stderr.print format("[%2d/%d] run %d %-9s %-7s ", i, total, run + 1, mode, server)
            result = measure(server, mode)
            @results << result.merge("server" => server, "mode" => mode, "run" => run + 1)
            warn format("%10.0f req/s  p50 %s  p99 %s  errors %d", result["rps"],
                        ms(result["p50_ms"]), ms(result["p99_ms"]), result["errors"])
          end
        end
      end
      path = write_json
      puts report
      puts
      puts "raw results: #{path.delete_prefix("#{ROOT}/")}"
    ensure
      FileUtils.rm_rf(@tmp)
    end

    private

    def check_tools
      abort "wrk not found (apt-get install wrk)" unless system("which wrk > /dev/null")
    end

    def measure(server, mode)
      port = free_port
      log = File.join(@tmp, "#{server}.log")
      pid = spawn_server(server, port, log)
      begin
        wait_ready(pid, port, log)
        wrk(port, mode, @opts[:warmup]) if @opts[:warmup].positive?
        result = wrk(port, mode, @opts[:duration])
        raise "#{server} died during the measurement:\n#{File.read(log)}" unless alive?(pid)

        result
      ensure
        stop(pid)
      end
    end

    def server_command(server, port)
      case server.delete_suffix("+yjit")
      when "narwhal"
        ["narwhal", "-E", "production", "-l", "#{HOST}:#{port}", APP]
      when "puma"
        ["puma", "--no-config", "-e", "production", "-w", "0", "-t", "1:1", "-s", "-q",
         "-b", "tcp://#{HOST}:#{port}", APP]
      when "unicorn"
        ["unicorn", "-E", "production", "-c", File.join(@tmp, "unicorn.conf.rb"), "-l", "#{HOST}:#{port}", APP]
      else abort "unknown server #{server}"
      end
    end

    # `bundle exec` loads the server's executable in the same process, so the
    # pid we get is the server (unicorn: its master).
    def spawn_server(server, port, log)
      env = { "BUNDLE_GEMFILE" => GEMFILE, "RACK_ENV" => "production" }
      extra = [@opts[:ruby_opt], ("--yjit" if server.end_with?("+yjit"))].compact
      env["RUBYOPT"] = [ENV.fetch("RUBYOPT", nil), *extra].compact.join(" ") unless extra.empty?
      cmd = ["bundle", "exec", *server_command(server, port)]
      cmd = ["taskset", "-c", @opts[:server_cpus], *cmd] if @opts[:server_cpus]
      Process.spawn(env, *cmd, chdir: ROOT, in: File::NULL, out: log, err: [:child, :out], pgroup: true)
    end

    def free_port
      s = TCPServer.new(HOST, 0)
      s.addr[1]
    ensure
      s&.close
    end

    def alive?(pid)
      Process.waitpid(pid, Process::WNOHANG).nil?
    rescue Errno::ECHILD
      false
    end

    # Polls the port until it accepts a connection.
    def wait_ready(pid, port, log)
      deadline = now + 30
      loop do
        raise "server exited before listening:\n#{File.read(log)}" unless alive?(pid)

        begin
          Socket.tcp(HOST, port, connect_timeout: 1).close
          return
        rescue SystemCallError, IOError
          raise "server not listening on #{port} after 30 s:\n#{File.read(log)}" if now > deadline

          IO.select(nil, nil, nil, 0.02) # poll interval, not a fixed wait
        end
      end
    end

    # TERM to the pid we started (puma/narwhal exit; unicorn's master kills
    # its worker), KILL to the process group if that did not work in 10 s.
    def stop(pid)
      Process.kill("TERM", pid)
      deadline = now + 10
      until (done = Process.waitpid(pid, Process::WNOHANG))
        break if now > deadline

        IO.select(nil, nil, nil, 0.02)
      end
      return if done

      warn "pid #{pid} ignored TERM; killing its process group"
      Process.kill("KILL", -pid)
      Process.waitpid(pid)
    rescue Errno::ESRCH, Errno::ECHILD
      nil
    end

    def now
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end

    def wrk(port, mode, seconds)
      cmd = ["wrk", "-t#{@opts[:threads]}", "-c#{@opts[:connections]}", "-d#{seconds}s", "--latency"]
      cmd += ["-H", "Connection: close"] if mode == "close"
      cmd << "http://#{HOST}:#{port}/"
      cmd = ["taskset", "-c", @opts[:wrk_cpus], *cmd] if @opts[:wrk_cpus]
      out = IO.popen(cmd, err: %i[child out], &:read)
      raise "wrk failed:\n#{out}" unless $?.success?

      parse_wrk(out)
    end

    def parse_wrk(out)
      socket = { "connect" => 0, "read" => 0, "write" => 0, "timeout" => 0 }
      if (m = out.match(/Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/))
        socket = socket.keys.zip(m.captures.map(&:to_i)).to_h
      end
      non2xx = out[/Non-2xx or 3xx responses: (\d+)/, 1].to_i
      {
        "rps" => out[/Requests\/sec:\s+([\d.]+)/, 1].to_f,
        "requests" => out[/(\d+) requests in/, 1].to_i,
        "p50_ms" => latency(out, "50%"),
        "p99_ms" => latency(out, "99%"),
        "socket_errors" => socket,
        "non_2xx_3xx" => non2xx,
        "errors" => socket.values.sum + non2xx,
        "wrk_output" => out
      }
    end

    # wrk prints 812.00us, 1.23ms, 2.00s
    def latency(out, pct)
      m = out.match(/^\s+#{Regexp.escape(pct)}\s+([\d.]+)(us|ms|s|m)\b/)
      return nil unless m

      m[1].to_f * { "us" => 0.001, "ms" => 1.0, "s" => 1000.0, "m" => 60_000.0 }.fetch(m[2])
    end

    def median(values)
      v = values.compact.sort
      return nil if v.empty?

      v.size.odd? ? v[v.size / 2] : (v[v.size / 2 - 1] + v[v.size / 2]) / 2.0
    end

    def ms(value)
      return "-" unless value

      value < 1 ? format("%.0f µs", value * 1000) : format("%.2f ms", value)
    end

    def report
      lines = []
      lines << "hello.ru, wrk -t#{@opts[:threads]} -c#{@opts[:connections]} -d#{@opts[:duration]}s, " \
               "median of #{@opts[:runs]} interleaved run(s), #{@opts[:warmup]} s warm-up, " \
               "#{RUBY_DESCRIPTION.split(' (').first}#{" #{@opts[:ruby_opt]}" if @opts[:ruby_opt]}, " \
               "#{Etc.nprocessors} CPUs"
      @opts[:modes].each do |mode|
        lines << ""
        lines << (mode == "keepalive" ? "### keep-alive" : "### Connection: close")
        lines << ""
        lines << "| server | req/s (median) | min–max | p50 | p99 | errors | vs narwhal |"
        lines << "|---|---:|---:|---:|---:|---:|---:|"
        base = median(rows(mode, "narwhal").map { |r| r["rps"] })
        note = false
        @opts[:servers].each do |server|
          rs = rows(mode, server)
          rps = rs.map { |r| r["rps"] }
          med = median(rps)
          ratio = base&.positive? ? format("%.2f×", med / base) : "-"
          errors = rs.sum { |r| r["errors"] }.to_s
          if eof_framed?(rs)
            errors += "¹"
            note = true
          end
          lines << format("| %s | %.0f | %.0f–%.0f | %s | %s | %s | %s |", server, med, rps.min, rps.max,
                          ms(median(rs.map { |r| r["p50_ms"] })), ms(median(rs.map { |r| r["p99_ms"] })),
                          errors, ratio)
        end
        next unless note

        lines << ""
        lines << "¹ one socket read error per request: the responses carry no Content-Length and end when " \
                 "the server closes the connection; wrk counts each such (complete) response as a read error."
      end
      lines.join("\n")
    end

    # Every error is a read error at the end of an EOF-framed response.
    def eof_framed?(results)
      results.all? do |r|
        s = r["socket_errors"]
        r["non_2xx_3xx"].zero? && r["errors"].positive? && s["read"] == r["errors"] &&
          (s["read"] - r["requests"]).abs <= r["requests"] / 100 + 16
      end
    end

    def rows(mode, server)
      @results.select { |r| r["mode"] == mode && r["server"] == server }
    end

    def write_json
      dir = File.join(ROOT, "bench", "results")
      FileUtils.mkdir_p(dir)
      tag = @opts[:ruby_opt].to_s.scan(/[a-z0-9]+/).join("-")
      path = File.join(dir, "#{Time.now.strftime('%Y-%m-%d')}-hello#{"-#{tag}" unless tag.empty?}.json")
      path = path.sub(/\.json\z/, "-#{Time.now.strftime('%H%M%S')}.json") if File.exist?(path)
      File.write(path, "#{JSON.pretty_generate(meta.merge('results' => @results))}\n")
      path
    end

    def meta
      {
        "date" => Time.now.iso8601,
        "git" => `git -C #{ROOT} rev-parse --short HEAD 2>/dev/null`.strip,
        "git_dirty" => !`git -C #{ROOT} status --porcelain -- lib ext exe 2>/dev/null`.strip.empty?,
        "source_sha256" => source_digest,
        "ruby" => RUBY_DESCRIPTION,
        "ruby_opt" => @opts[:ruby_opt],
        "cpu" => File.read("/proc/cpuinfo")[/model name\s*:\s*(.+)/, 1],
        "nprocessors" => Etc.nprocessors,
        "wrk" => `wrk -v 2>&1`.lines.first.to_s.strip,
        "gems" => locked_versions,
        "options" => @opts.transform_keys(&:to_s)
      }
    end

    # Identifies the narwhal code measured, uncommitted changes included.
    def source_digest
      files = Dir[File.join(ROOT, "{lib,ext,exe}", "**", "*.{rb,c,h}")].sort
      Digest::SHA256.hexdigest(files.map { |f| "#{f.delete_prefix(ROOT)}\0#{File.binread(f)}" }.join("\0"))[0, 16]
    end

    def locked_versions
      lock = File.read("#{GEMFILE}.lock")
      %w[puma unicorn rack nio4r].to_h { |g| [g, lock[/^    #{g} \(([^)]+)\)/, 1]] }
    end
  end

  def self.options(argv)
    opts = {
      duration: Integer(ENV.fetch("BENCH_DURATION", 10)),
      warmup: Integer(ENV.fetch("BENCH_WARMUP", 2)),
      runs: Integer(ENV.fetch("BENCH_RUNS", 3)),
      servers: ENV.fetch("BENCH_SERVERS", SERVERS.join(",")).split(","),
      modes: ENV.fetch("BENCH_MODES", MODES.join(",")).split(","),
      threads: 2,
      connections: 16,
      ruby_opt: ENV.fetch("BENCH_RUBYOPT", nil),
      server_cpus: nil,
      wrk_cpus: nil
    }
    OptionParser.new do |o|
      o.banner = "Usage: ruby bench/hello.rb [options]"
      o.on("-d", "--duration SECONDS", Integer, "measured seconds per run (#{opts[:duration]})") { |v| opts[:duration] = v }
      o.on("-w", "--warmup SECONDS", Integer, "warm-up seconds before each run (#{opts[:warmup]})") { |v| opts[:warmup] = v }
      o.on("-r", "--runs N", Integer, "interleaved runs per server and mode (#{opts[:runs]})") { |v| opts[:runs] = v }
      o.on("-s", "--servers LIST", "comma separated: #{SERVERS.join(',')}; NAME+yjit runs NAME with --yjit") do |v|
        opts[:servers] = v.split(",")
      end
      o.on("-m", "--modes LIST", "comma separated: #{MODES.join(',')}") { |v| opts[:modes] = v.split(",") }
      o.on("-t", "--threads N", Integer, "wrk threads (2)") { |v| opts[:threads] = v }
      o.on("-c", "--connections N", Integer, "wrk connections (16)") { |v| opts[:connections] = v }
      o.on("--ruby-opt OPTS", "extra RUBYOPT for the servers, e.g. --yjit") { |v| opts[:ruby_opt] = v }
      o.on("--server-cpus LIST", "pin the servers with taskset -c LIST") { |v| opts[:server_cpus] = v }
      o.on("--wrk-cpus LIST", "pin wrk with taskset -c LIST") { |v| opts[:wrk_cpus] = v }
    end.parse!(argv)
    bad = opts[:servers].reject { |s| SERVERS.include?(s.delete_suffix("+yjit")) } + (opts[:modes] - MODES)
    abort "unknown server/mode: #{bad.join(', ')}" unless bad.empty?
    opts
  end
end

Bench::Hello.new(Bench.options(ARGV)).run if $PROGRAM_NAME == __FILE__
