# frozen_string_literal: true

# The fleet proof measured: three narwhal instances, each in a network
# namespace of its own, behind haproxy running examples/haproxy-fleet.cfg
# (test/support/fleet.rb, as test/integration/fleet_test.rb runs it), and
# open-loop load through haproxy across each event in turn:
#
#   rolling   USR2 to each instance in turn (upgrade_retire_old)
#   broken    a release that raises at load, then one whose /up answers 500, on app2
#   stuck     a request that never returns on app2, past `timeout` 2
#   overload  3x the fleet's capacity (1 worker x 1 thread x 20 ms each) for 10 s, queue_deadline 1
#   term      graceful TERM of app3, drain_delay 1, agent-inter 200ms
#
#   ruby bench/fleet.rb                      # every event once, steady load 200 req/s
#   ruby bench/fleet.rb -e overload -s 20    # one event, a 20 s overload
#
# Needs root (namespaces) and haproxy. Prints each event's numbers as
# Markdown (docs/benchmarks.md, "A fleet behind haproxy").
require "etc"
require "optparse"
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__), File.expand_path("../test", __dir__))
require "narwhal"
require "support/fleet"
require "support/fleet/scenarios"

EVENTS = %w[rolling broken stuck overload term].freeze
opts = { events: EVENTS, rate: 200, overload_rate: 450, seconds: 10 }
OptionParser.new do |o|
  o.on("-e", "--events LIST", "comma separated: #{EVENTS.join(',')}") { |v| opts[:events] = v.split(",") }
  o.on("-r", "--rate N", Integer, "steady load, requests a second (#{opts[:rate]})") { |v| opts[:rate] = v }
  o.on("-o", "--overload-rate N", Integer, "overload, requests a second (450)") { |v| opts[:overload_rate] = v }
  o.on("-s", "--seconds N", Float, "overload duration (10)") { |v| opts[:seconds] = v }
end.parse!
abort "unknown event: #{(opts[:events] - EVENTS).join(', ')}" unless (opts[:events] - EVENTS).empty?

# Prints one event's numbers.
module FleetReport
  Scenarios = Narwhal::Fleet::Scenarios
  EVENT_NAMES = { "rolling" => :rolling_deploy, "broken" => :broken_deploy, "stuck" => :stuck_request,
                  "overload" => :overload, "term" => :graceful_term }.freeze

  module_function

  def ms(seconds)
    seconds ? format("%.1f ms", seconds * 1000) : "–"
  end

  def s(seconds)
    format("%.2f s", seconds)
  end

  def pct(sorted, pct)
    Narwhal::Fleet::Outcome.percentile(sorted, pct)
  end

  def run(event, opts)
    fleet = Scenarios.fleet_for(EVENT_NAMES.fetch(event)).start
    outcome = measure(fleet, event, opts)
    troubled = fleet.haproxy.troubled_requests.size
    puts "### #{event}\n\n#{lines(event, outcome, troubled).map { |l| "- #{l}" }.join("\n")}\n\n"
  rescue RuntimeError => e
    puts "### #{event}\n\nFAILED: #{e.message}\n\n"
  ensure
    fleet&.stop
  end

  def measure(fleet, event, opts)
    case event
    when "rolling" then Scenarios.rolling_deploy(fleet, rate: opts[:rate])
    when "broken" then Scenarios.broken_deploy(fleet, rate: opts[:rate])
    when "stuck" then Scenarios.stuck_request(fleet, rate: opts[:rate])
    when "overload" then Scenarios.overload(fleet, rate: opts[:overload_rate], seconds: opts[:seconds])
    when "term" then Scenarios.graceful_term(fleet, rate: opts[:rate])
    end
  end

  def lines(event, outcome, troubled)
    expected = event == "overload" ? [200, 503] : [200]
    common = ["requests: #{outcome.results.size}, answers #{outcome.statuses.sort_by(&:to_s).to_h}, " \
              "failed #{outcome.failed(expected).size}; haproxy retried or cut #{troubled}",
              "200s by instance: #{outcome.by_instance}",
              "latency of the 200s: p50 #{ms(pct(outcome.latencies, 50))}, p99 #{ms(pct(outcome.latencies, 99))}, " \
              "max #{ms(outcome.latencies.last)}",
              "haproxy's states: #{%w[app1 app2 app3].to_h { |n| [n, outcome.states_of(n)] }}, " \
              "weights (min, max): #{%w[app1 app2 app3].to_h { |n| [n, outcome.weights_of(n)] }}"]
    common + send("#{event}_lines", outcome.facts, outcome)
  end

  def rolling_lines(facts, _outcome)
    ["each deploy (USR2 to the old master gone): #{facts[:seconds].map { |x| s(x) }.join(', ')}",
     "versions answered afterwards: #{facts[:versions]}"]
  end

  def broken_lines(facts, _outcome)
    facts[:releases].map { |version, r| "release #{version}: given up in #{s(r[:seconds])}: #{r[:line]}" } +
      ["app2's master #{facts[:master]} (first #{facts[:first_master]}), .oldbin left: #{facts[:oldbin]}, " \
       "versions app2 answered afterwards: #{facts[:versions]}"]
  end

  def stuck_lines(facts, outcome)
    ["the stuck request: #{facts[:status]} (connection: #{facts[:connection]}) after #{s(facts[:seconds])}, " \
     "#{facts[:elsewhere].size} tries answered by other instances first",
     "app2 answered #{outcome.answered_by_after(2, facts[:answered_at])} requests afterwards",
     "narwhal: #{facts[:kill_line]}"]
  end

  def overload_lines(facts, outcome)
    served = outcome.queue_times
    shed = outcome.latencies(503)
    ["#{facts[:rate]} req/s for #{facts[:seconds]} s: served #{served.size}, shed #{shed.size} " \
     "(narwhal's 503: #{outcome.with_status(503).count { |r| r.head.include?('retry-after: 1') }})",
     "queue time of the served: p50 #{ms(pct(served, 50))}, p99 #{ms(pct(served, 99))}, max #{ms(served.last)}",
     "latency of the 503s: p50 #{ms(pct(shed, 50))}, p99 #{ms(pct(shed, 99))}, max #{ms(shed.last)}"]
  end

  def term_lines(facts, outcome)
    ["after TERM: haproxy shows DRAIN at #{s(facts[:drained])}, listeners close at #{s(facts[:closed])}, " \
     "master gone at #{s(facts[:exited])}",
     "requests app3 answered that were sent after DRAIN: #{outcome.answered_by_after(3, facts[:drained_at])}"]
  end
end

puts "Measured #{Time.now.utc.strftime('%Y-%m-%d')}: #{Etc.nprocessors} cores, #{`uname -r`.strip}, " \
     "#{RUBY_DESCRIPTION}, #{`haproxy -v`.lines.first.strip}, narwhal #{`git -C #{__dir__} rev-parse --short HEAD`.strip}; " \
     "load average #{File.read('/proc/loadavg').split.first(3).join(' ')}\n\n"
opts[:events].each { |event| FleetReport.run(event, opts) }
