# frozen_string_literal: true

# The benchmark suite: narwhal side by side with its peers, every scenario in
# bench/README.md. Each measurement starts a fresh server, servers are
# interleaved, and each result is the median of --runs runs.
#
#   ruby bench/run.rb                            # everything (about 105 min)
#   ruby bench/run.rb -s hello,cpu -S narwhal,puma
#   ruby bench/run.rb --quick                    # 1 short run of each: does it all work?
#   ruby bench/run.rb -s hello -S narwhal --baseline ../old   # before/after a change
#   ruby bench/run.rb -s hello -S narwhal --narwhal-threads 5  # narwhal at threads 1 and 5
#
# Writes bench/results/<date>-<scenario>.{json,md}; `ruby bench/report.rb`
# turns the newest results into docs/benchmarks.md and its charts.
require "optparse"
$stdout.sync = true
require_relative "lib/bench"

opts = { scenarios: nil, servers: Bench::SERVERS.keys, runs: 3, quick: false }
OptionParser.new do |o|
  o.banner = "Usage: ruby bench/run.rb [options]"
  o.on("-s", "--scenarios LIST", "comma separated (default: all): " \
                                 "#{Bench.scenarios(Bench::FULL).map(&:name).join(',')}") do |v|
    opts[:scenarios] = v.split(",")
  end
  o.on("-S", "--servers LIST", "comma separated (default: all): #{Bench::SERVERS.keys.join(',')}") do |v|
    opts[:servers] = v.split(",")
  end
  o.on("-r", "--runs N", Integer, "interleaved runs of each measurement (3)") { |v| opts[:runs] = v }
  o.on("--quick", "short durations, 1 run: checks that everything works") { opts[:quick] = true }
  o.on("--baseline DIR", "also run narwhal from another checkout DIR (e.g. a `git worktree` of the " \
                         "previous commit) as narwhal-baseline") { |dir| opts[:baseline] = dir }
  o.on("--narwhal-threads N", Integer, "also run narwhal with `threads N` in each process as narwhal-tN " \
                                       "(e.g. hello at threads 1 and N in one run)") { |n| opts[:narwhal_threads] = n }
  o.on("--ruby-opt OPTS", "extra RUBYOPT for the Ruby servers, e.g. --yjit") { |v| Bench.ruby_opt = v }
end.parse!(ARGV)
begin
  if opts[:baseline]
    Bench.add_baseline(opts[:baseline])
    opts[:servers] |= ["narwhal-baseline"]
  end
  if opts[:narwhal_threads]
    Bench.add_narwhal_threads(opts[:narwhal_threads])
    opts[:servers] |= ["narwhal-t#{opts[:narwhal_threads]}"]
  end
rescue ArgumentError => e
  abort e.message
end

opts[:runs] = 1 if opts[:quick] && !ARGV.include?("-r")
all = Bench.scenarios(opts[:quick] ? Bench::QUICK : Bench::FULL)
chosen = opts[:scenarios] ? all.select { |s| opts[:scenarios].include?(s.name) } : all
unknown = (opts[:scenarios] || []) - all.map(&:name) + (opts[:servers] - Bench::SERVERS.keys)
abort "unknown scenario or server: #{unknown.join(', ')}" unless unknown.empty?
abort "narwhal must be among the servers: every ratio is to narwhal" unless opts[:servers].include?("narwhal")

Bench::Runner.new(scenarios: chosen, servers: opts[:servers].map { |n| Bench::SERVERS.fetch(n) },
                  runs: opts[:runs], quick: opts[:quick]).run
