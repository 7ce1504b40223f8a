# frozen_string_literal: true

# What the access log costs per request, next to Rack::CommonLogger.
#
#   ruby bench/access_log.rb            # 3 interleaved runs of 5 s each
#   ruby bench/access_log.rb -r 5 -d 10
#
# One narwhal worker (threads 1) serves bench/apps/hello.ru over keep-alive
# (wrk -t2 -c8), four ways, each a fresh server, in turn (A B C D A B C D
# ...): without a log, with `access_log` in each format, and with
# Rack::CommonLogger writing to a file (sync: each line written at once).
# The cost per request is CPU time: the server's processes' user + system
# time (/proc) over the measured run, per request, less the same without a
# log; it holds on a busy machine, where the rates (also shown) swing with
# the neighbours' load. The log files are counted afterwards: every
# request must have its line. Traffic goes to 127.0.0.1 only.

require "optparse"
require_relative "lib/bench"

module Bench
  # The four servers and their measurement.
  class AccessLogCost
    HELLO = File.join(APPS, "hello.ru")
    VARIANTS = {
      "no log" => { config: "" },
      "access_log :combined" => { config: "access_log 'access.log', format: :combined\n" },
      "access_log :json" => { config: "access_log 'access.log', format: :json\n" },
      "Rack::CommonLogger" => { ru: <<~RU }
        log = File.open(File.join(__dir__, "access.log"), "a")
        log.sync = true
        use Rack::CommonLogger, log
        run Rack::Builder.parse_file(#{HELLO.inspect}).then { |app| app.is_a?(Array) ? app.first : app }
      RU
    }.freeze

    def initialize(runs:, seconds:)
      @runs = runs
      @seconds = seconds
    end

    def run
      rates = Hash.new { |h, k| h[k] = [] }
      cpu = Hash.new { |h, k| h[k] = [] }
      lines = Hash.new(0)
      requests = Hash.new(0)
      @runs.times do
        VARIANTS.each do |name, variant|
          result, cpu_us, logged = measure(variant)
          rates[name] << result["rps"]
          cpu[name] << cpu_us
          requests[name] += result["requests"]
          lines[name] += logged
        end
      end
      report(rates, cpu, requests, lines)
    end

    private

    # One fresh server: warm-up, then the measured wrk run; its CPU time
    # per request (µs); the lines its log got (warm-up included).
    def measure(variant)
      Dir.mktmpdir("narwhal-access-log-bench") do |dir|
        port = Bench.free_port
        ru = variant[:ru] ? File.join(dir, "app.ru").tap { |p| File.write(p, variant[:ru]) } : HELLO
        conf = File.join(dir, "narwhal.rb")
        File.write(conf, "worker_processes 1\nworking_directory #{dir.inspect}\n#{variant[:config]}")
        pid = Process.spawn({ "BUNDLE_GEMFILE" => GEMFILE }, "bundle", "exec", "narwhal", "-E", "production",
                            "-c", conf, "-l", "#{HOST}:#{port}", ru,
                            chdir: ROOT, in: File::NULL, out: File.join(dir, "server.log"), err: %i[child out])
        begin
          Bench.wait_until(30, "narwhal on #{port}") { listening?(port) }
          Wrk.run(port, threads: 2, connections: 8, seconds: 2)
          before = ProcessTree.cpu_seconds(pid)
          result = Wrk.run(port, threads: 2, connections: 8, seconds: @seconds)
          cpu_us = (ProcessTree.cpu_seconds(pid) - before) * 1e6 / result["requests"]
        ensure
          Process.kill(:TERM, pid)
          Process.wait(pid)
        end
        log = File.join(dir, "access.log")
        [result, cpu_us, File.exist?(log) ? File.foreach(log).count : 0]
      end
    end

    def listening?(port)
      Socket.tcp(HOST, port, connect_timeout: 1).close
      true
    rescue SystemCallError
      false
    end

    def report(rates, cpu, requests, lines)
      base = median(cpu["no log"])
      puts "narwhal #{`git -C #{ROOT} rev-parse --short HEAD`.strip}, hello, 1 worker, keep-alive (wrk -t2 -c8), " \
           "#{@runs} x #{@seconds} s, #{RUBY_DESCRIPTION.split(' [').first}"
      puts
      puts "| | CPU per request (median, min–max) | cost per request | requests/s (median, min–max) | lines logged |"
      puts "|---|---:|---:|---:|---:|"
      rates.each do |name, list|
        us = median(cpu[name])
        cost = name == "no log" ? "—" : format("%.1f µs", us - base)
        logged = name == "no log" ? "—" : "#{lines[name]} (measured requests: #{requests[name]})"
        puts format("| %s | %.1f µs (%.1f–%.1f) | %s | %.0f (%.0f–%.0f) | %s |", name, us, cpu[name].min,
                    cpu[name].max, cost, median(list), list.min, list.max, logged)
      end
    end

    def median(list)
      sorted = list.sort
      mid = sorted.size / 2
      sorted.size.odd? ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2.0
    end
  end
end

if $PROGRAM_NAME == __FILE__
  opts = { runs: 3, seconds: 5 }
  OptionParser.new do |o|
    o.banner = "Usage: ruby bench/access_log.rb [options]"
    o.on("-r", "--runs N", Integer, "interleaved runs (3)") { |v| opts[:runs] = v }
    o.on("-d", "--seconds N", Integer, "seconds per measurement (5)") { |v| opts[:seconds] = v }
  end.parse!
  Bench::AccessLogCost.new(**opts).run
end
