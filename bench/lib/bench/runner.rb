# frozen_string_literal: true

require "digest"

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

    # 700 slow connections and ab's 1,000 need more descriptors than the
    # usual soft limit; servers inherit the raised one.
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
          raise "#{server.name} died during the measurement:\n#{process.log}" unless process.alive?

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

  # Summarises a scenario's runs and writes them as JSON and Markdown.
  class Report
    def initialize(scenario, results, plan, runs, started, quick)
      @scenario = scenario
      @results = results
      @plan = plan
      @runs = runs
      @started = started
      @quick = quick
    end

    # A run with another narwhal beside narwhal (--baseline, --narwhal-threads)
    # compares narwhal with itself: its files never replace the suite's.
    def baseline?
      @plan.any? { |_, s| s.name.start_with?("narwhal-") }
    end

    def write
      FileUtils.mkdir_p(RESULTS)
      tag = Bench.ruby_opt.to_s.scan(/[a-z0-9]+/).join("-")
      # a comparison of narwhals never replaces the suite's published results
      suffix = [("-#{tag}" unless tag.empty?), ("-baseline" if baseline?), ("-quick" if @quick)].join
      base = File.join(RESULTS, "#{@started.strftime('%Y-%m-%d')}-#{@scenario.name}#{suffix}")
      data = document
      File.write("#{base}.json", "#{JSON.pretty_generate(data)}\n")
      markdown = Markdown.scenario(data)
      File.write("#{base}.md", "#{markdown}\n")
      puts markdown
      puts "results: #{base.delete_prefix("#{ROOT}/")}.{json,md}"
      data
    end

    private

    def document
      {
        "scenario" => @scenario.name, "title" => @scenario.title, "about" => @scenario.about,
        "date" => @started.iso8601, "runs" => @runs, "quick" => @quick, "baseline" => baseline?, "ruby_opt" => Bench.ruby_opt,
        "primary" => @scenario.primary, "lower_is_better" => @scenario.lower_is_better || false,
        "columns" => @scenario.columns.map { |c| { "key" => c.key, "header" => c.header, "format" => c.format.to_s } },
        "machine" => Machine.describe,
        "servers" => @plan.map(&:last).uniq.to_h { |s| [s.name, { "model" => s.model.to_s, "settings" => s.settings }] },
        "variants" => @scenario.variants.map { |v| variant(v) }
      }
    end

    def variant(var)
      servers = @plan.select { |v, _| v == var }.map(&:last)
      rows = servers.map { |s| row(var, s) }
      # A ratio of error counts says nothing; those tables compare counts.
      narwhal = rows.find { |r| r["server"] == "narwhal" } unless @scenario.primary == "errors"
      base = narwhal&.dig("median", @scenario.primary)
      rows.each do |r|
        value = r.dig("median", @scenario.primary)
        r["ratio"] = (value / base.to_f).round(3) if base&.positive? && value
        r["paired_ratio"] = paired_ratio(r, narwhal) if narwhal && !r.equal?(narwhal)
      end
      { "key" => var.key, "title" => var.title, "rows" => rows }
    end

    # The median of the ratios of runs measured one after the other (run i
    # of each server): on a busy machine the load of the moment moves both,
    # and a slow spell in one server's runs moves its median alone.
    def paired_ratio(row, narwhal)
      key = @scenario.primary
      pairs = row["runs"].zip(narwhal["runs"]).filter_map do |run, base|
        next if run.nil? || base.nil? || run["failure"] || base["failure"]

        run[key].to_f / base[key] if run[key] && base[key]&.positive?
      end
      Bench.median(pairs).round(3) if pairs.size > 1
    end

    def row(var, server)
      runs = @results[var.key][server.name]
      good = runs.reject { |r| r["failure"] }
      keys = good.flat_map(&:keys).uniq.select { |k| good.all? { |r| r[k].nil? || r[k].is_a?(Numeric) } }
      stat = ->(fn) { keys.to_h { |k| [k, fn.call(good.filter_map { |r| r[k] })] } }
      processes, threads = server.shape(var.processes, var.threads)
      {
        "server" => server.name, "shape" => shape(server, processes, threads),
        "median" => stat.call(->(v) { Bench.median(v) }), "min" => stat.call(->(v) { v.min }),
        "max" => stat.call(->(v) { v.max }), "sum" => stat.call(->(v) { v.sum }),
        # Tables that count failures use a framed app: there every error is one.
        "eof_framed" => @scenario.primary != "errors" && !good.empty? && good.all? { |r| Wrk.eof_framed?(r) },
        "failures" => runs.filter_map { |r| r["failure"] }, "runs" => runs
      }
    end

    def shape(server, processes, threads)
      case server.model
      when :processes then "#{processes} processes".sub(/\A1 processes/, "1 process")
      when :fibers then "#{processes} × fibers"
      when :reference then "2 workers (reference)"
      else "#{processes} × #{threads}"
      end
    end
  end

  # What the numbers were measured on.
  module Machine
    module_function

    def describe
      {
        "cpu" => File.read("/proc/cpuinfo")[/model name\s*:\s*(.+)/, 1],
        "cores" => Etc.nprocessors,
        "memory_gb" => (File.read("/proc/meminfo")[/MemTotal:\s+(\d+)/, 1].to_i / 1024.0 / 1024).round(1),
        "kernel" => `uname -sr`.strip,
        "ruby" => RUBY_DESCRIPTION,
        "versions" => versions,
        "narwhal_git" => `git -C #{ROOT} rev-parse --short HEAD 2>/dev/null`.strip,
        "narwhal_source_sha256" => source_digest
      }
    end

    def versions
      lock = File.read("#{GEMFILE}.lock")
      gems = %w[narwhal puma unicorn pitchfork falcon iodine agoo rack].to_h { |g| [g, lock[/^    #{g} \(([^)]+)\)/, 1]] }
      gems.merge("nginx" => `nginx -v 2>&1`.strip.sub(%r{.*nginx/}, ""),
                 "wrk" => `wrk -v 2>&1`.lines.first.to_s[/wrk ([\d.]+)/, 1],
                 "ab" => `ab -V 2>&1`[/Version ([\d.]+)/, 1])
    end

    # Identifies the narwhal code measured, uncommitted changes included.
    def source_digest
      files = Dir[File.join(ROOT, "{lib,ext,exe}", "**", "*.{rb,c,h}")].sort
      Digest::SHA256.hexdigest(files.map { |f| "#{f.delete_prefix(ROOT)}\0#{File.binread(f)}" }.join("\0"))[0, 16]
    end
  end
end
