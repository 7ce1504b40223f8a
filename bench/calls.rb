# frozen_string_literal: true

# Ruby method calls narwhal makes per request for examples/hello.ru.
#
#   ruby bench/calls.rb
#   ruby bench/calls.rb --request close     # a new connection per request
#   ruby bench/calls.rb --threads 5         # with `threads 5`
#   ruby bench/calls.rb --methods 60        # list more methods
#
# As bench/allocations.rb, it starts the real server (`narwhal -E
# production`), here on bench/calls_app.ru: hello.ru behind a TracePoint
# on :call and :c_call that counts every method call in the worker, in
# every thread, from request 1,000 to request 11,000 (10,000 full request
# cycles). The same client process sends the requests over keep-alive
# connections. Traffic goes to 127.0.0.1 only.

require_relative "allocations"

module Bench
  # Runs the server and the client; prints the calls per request.
  class Calls < Allocations
    private

    def app_file
      "calls_app.ru"
    end

    def app_env(out)
      { "CALLS_FROM" => @opts[:from].to_s, "CALLS_TO" => @opts[:to].to_s, "CALLS_OUT" => out }
    end

    def config_lines(_tmp)
      lines = []
      lines << "threads #{@opts[:threads]}" if @opts[:threads]
      lines << "worker_processes #{@opts[:workers]}" if @opts[:workers]
      lines
    end

    def print_report(r)
      n = r["requests"].to_f
      methods = r["methods"]
      total = ->(event) { methods.select { |e, _, _| event.nil? || e == event }.sum { |_, _, c| c } / n }
      puts "narwhal, examples/hello.ru, request: #{@opts[:request]}, #{r['ruby']}#{' +YJIT' if r['yjit']}" \
           "#{", threads #{@opts[:threads]}" if @opts[:threads]}#{", workers #{@opts[:workers]}" if @opts[:workers]}"
      puts
      puts format("**%.2f method calls/request**: %.2f Ruby (:call), %.2f C (:c_call); over requests %d..%d",
                  total.call(nil), total.call("call"), total.call("c_call"), @opts[:from], @opts[:to])
      puts
      puts "| method | kind | per request |"
      puts "|---|---|---:|"
      methods.sort_by { |e, m, c| [-c, e, m] }.first(@opts[:methods]).each do |event, method, count|
        puts format("| %s | %s | %.2f |", method, event == "call" ? "Ruby" : "C", count / n)
      end
    end
  end

  def self.calls_options(argv)
    opts = { from: 1_000, to: 11_000, request: "wrk", methods: 40, ruby_opt: nil, threads: nil, workers: nil }
    OptionParser.new do |o|
      o.banner = "Usage: ruby bench/calls.rb [options]"
      o.on("--from N", Integer, "first mark (1000)") { |v| opts[:from] = v }
      o.on("--to N", Integer, "second mark (11000)") { |v| opts[:to] = v }
      o.on("--request NAME", Allocations::REQUESTS.keys, "request sent: wrk (default), close or browser") do |v|
        opts[:request] = v
      end
      o.on("--threads N", Integer, "narwhal's `threads N` (default: its default)") { |v| opts[:threads] = v }
      o.on("--workers N", Integer, "worker_processes N (default: 1): counted in the worker that reaches --to first") do |v|
        opts[:workers] = v
      end
      o.on("--methods N", Integer, "methods listed (40)") { |v| opts[:methods] = v }
      o.on("--ruby-opt OPTS", "extra RUBYOPT for the server, e.g. --yjit") { |v| opts[:ruby_opt] = v }
    end.parse!(argv)
    opts
  end
end

Bench::Calls.new(Bench.calls_options(ARGV)).run if $PROGRAM_NAME == __FILE__
