# frozen_string_literal: true

module Bench
  # Runs scenarios against servers: a fresh server per measurement, servers
  # interleaved (A B C A B C ...) so that drift of the machine hits all alike.
  class Runner
    def initialize(scenarios:, servers:, runs:, quick: false)
      @scenarios = scenarios
      @servers = servers
      @runs = runs
      @quick = quick
    end

    def run
      check_tools
      raise_fd_limit
      @scenarios.map { |scenario| run_scenario(scenario) }
    end

    private

    def check_tools
      missing = %w[wrk ab nginx].reject { |t| system("command -v #{t} > /dev/null") }
      abort "missing: #{missing.join(', ')} (apt-get install wrk apache2-utils nginx)" unless missing.empty?
    end

    # 700 slow connections, ab's 1,000 and the idle scenario's 5,000 need
    # more descriptors than the usual soft limit; servers inherit the
    # raised one.
    def raise_fd_limit
      _, hard = Process.getrlimit(:NOFILE)
      Process.setrlimit(:NOFILE, hard)
    end

    def run_scenario(scenario)
      started = Time.now
      results = Hash.new { |h, k| h[k] = Hash.new { |h2, k2| h2[k2] = [] } }
      plan = scenario.variants.flat_map { |v| servers_for(v).map { |s| [v, s] } }
      total = plan.size * @runs
      i = 0
      @runs.times do |run|
        plan.each do |variant, server|
          i += 1
          $stderr.print format("%-8s [%3d/%d] run %d %-14s %-9s ", scenario.name, i, total, run + 1,
                               variant.key, server.name)
          result = measure(variant, server)
          results[variant.key][server.name] << result
          warn summary_line(scenario, result)
        end
      end
      Report.new(scenario, results, plan, @runs, started, @quick).write
    end

    def servers_for(variant)
      @servers.select { |s| variant.serves?(s) }
    end

    def measure(variant, server)
      Dir.mktmpdir("narwhal-bench-") do |dir|
        processes, threads = server.shape(variant.processes, variant.threads)
        launch = Launch.new(app: variant.app_path, port: Bench.free_port, processes: processes, threads: threads,
                            dir: dir, preload: variant.preload_for(server))
        process = ServerProcess.new(server, launch)
        begin
          process.wait_ready
          result = variant.measure.call(process)
          raise "#{server.name} died during the measurement:\n#{process.log}" unless variant.stops || process.alive?

          result
        rescue StandardError => e
          { "failure" => e.message.lines.first(3).join.strip }
        ensure
          process.stop
        end
      end
    end

    def summary_line(scenario, result)
      return "FAILED: #{result['failure']}" if result["failure"]

      scenario.columns.first(4).map do |c|
        "#{c.header} #{Markdown.number(result[c.key], c.format.to_s)}"
      end.join("  ")
    end
  end
end
