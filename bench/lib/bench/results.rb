# frozen_string_literal: true

require "digest"

module Bench
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
        "variants" => @scenario.variants.map { |v| variant(v) },
        "ratios" => @scenario.ratios.to_a,
        "comparisons" => @scenario.comparisons.to_a.map { |c| comparison(c) }
      }
    end

    def variant(var)
      servers = @plan.select { |v, _| v == var }.map(&:last)
      rows = servers.map { |s| row(var, s) }
      # A ratio of error counts says nothing; those tables compare counts.
      narwhal = rows.find { |r| r["server"] == "narwhal" } unless @scenario.primary == "errors"
      rows.each { |r| add_ratios(r, narwhal) } if narwhal
      { "key" => var.key, "title" => var.title, "rows" => rows }
    end

    # The primary metric's ratio to narwhal ("ratio", "paired_ratio"), and
    # those of the scenario's further ratio columns ("ratios").
    def add_ratios(row, narwhal)
      [@scenario.primary, *@scenario.ratios].each do |key|
        base = narwhal.dig("median", key)
        value = row.dig("median", key)
        ratio = (value / base.to_f).round(3) if base&.positive? && value
        paired = Bench.paired_ratio(row["runs"], narwhal["runs"], key) unless row.equal?(narwhal)
        if key == @scenario.primary
          row["ratio"] = ratio if ratio
          row["paired_ratio"] = paired unless row.equal?(narwhal)
        else
          (row["ratios"] ||= {})[key] = { "ratio" => ratio, "paired_ratio" => paired }
        end
      end
    end

    # The median of the ratios of runs measured one after the other (run i
    # of each server): on a busy machine the load of the moment moves both,
    # and a slow spell in one server's runs moves its median alone.
    def paired_ratio(row, narwhal)
      Bench.paired_ratio(row["runs"], narwhal["runs"], @scenario.primary)
    end

    # Each server in one variant as a multiple of itself in another, on the
    # primary metric and on CPU per request where the scenario has it.
    def comparison(spec)
      keys = [@scenario.primary, *(@scenario.columns.map(&:key) & [CPU.key])]
      rows = @plan.select { |v, _| v.key == spec.variant }.filter_map do |_, server|
        runs = @results[spec.variant][server.name]
        base = @results[spec.base][server.name]
        next if base.empty?

        { "server" => server.name, "values" => keys.to_h { |k| [k, compared(runs, base, k)] } }
      end
      { "title" => spec.title, "labels" => spec.labels, "keys" => keys, "rows" => rows }
    end

    def compared(runs, base, key)
      median = ->(rs) { Bench.median(rs.reject { |r| r["failure"] }.map { |r| r[key] }) }
      value = median.call(runs)
      before = median.call(base)
      ratio = (value / before.to_f).round(3) if before&.positive? && value
      { "base" => before, "value" => value, "ratio" => ratio, "paired_ratio" => Bench.paired_ratio(runs, base, key) }
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
      when :reference then "#{processes} worker#{'s' if processes > 1} (reference)"
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
      gems.merge("nginx" => `nginx -v 2>&1`.strip.sub(%r{.*nginx/}, ""), "haproxy" => haproxy_version,
                 "wrk" => `wrk -v 2>&1`.lines.first.to_s[/wrk ([\d.]+)/, 1],
                 "ab" => `ab -V 2>&1`[/Version ([\d.]+)/, 1])
    end

    # The quit scenario's second proxy; the rest of the suite runs without it.
    def haproxy_version
      `haproxy -v 2>&1`[/version ([\d.]+)/i, 1]
    rescue SystemCallError
      nil
    end

    # Identifies the narwhal code measured, uncommitted changes included.
    def source_digest
      files = Dir[File.join(ROOT, "{lib,ext,exe}", "**", "*.{rb,c,h}")].sort
      Digest::SHA256.hexdigest(files.map { |f| "#{f.delete_prefix(ROOT)}\0#{File.binread(f)}" }.join("\0"))[0, 16]
    end
  end
end
