# frozen_string_literal: true

require "etc"
require "fileutils"
require "json"
require "socket"
require "time"
require "tmpdir"

# The benchmark suite: narwhal side by side with its peers. See bench/README.md.
module Bench
  ROOT = File.expand_path("../..", __dir__)
  DIR = File.join(ROOT, "bench")
  GEMFILE = File.join(DIR, "Gemfile")
  APPS = File.join(DIR, "apps")
  RESULTS = File.join(DIR, "results")
  HOST = "127.0.0.1"
  # Every server gets this listen backlog where it can be set.
  BACKLOG = 1024
  # Poll interval of every wait-until loop: short against the waits themselves.
  POLL = 0.02

  def self.now
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  def self.free_port
    s = TCPServer.new(HOST, 0)
    s.addr[1]
  ensure
    s&.close
  end

  # Waits for the block to return a truthy value, or raises after +timeout+ s.
  def self.wait_until(timeout, what)
    deadline = now + timeout
    loop do
      value = yield
      return value if value
      raise "timed out after #{timeout} s waiting for #{what}" if now > deadline

      sleep POLL
    end
  end

  def self.median(values)
    v = values.compact.sort
    return nil if v.empty?

    v.size.odd? ? v[v.size / 2] : (v[v.size / 2 - 1] + v[v.size / 2]) / 2.0
  end

  # Percentile by nearest rank of a sorted array.
  def self.percentile(sorted, pct)
    return nil if sorted.empty?

    sorted[[(sorted.size * pct / 100.0).ceil - 1, 0].max]
  end

  # The median of the ratios of runs measured one after the other (run i
  # of +runs+ over run i of +base+), on +key+; nil with fewer than 2 pairs.
  def self.paired_ratio(runs, base, key)
    pairs = runs.zip(base).filter_map do |run, before|
      next if run.nil? || before.nil? || run["failure"] || before["failure"]

      run[key].to_f / before[key] if run[key] && before[key]&.positive?
    end
    median(pairs).round(3) if pairs.size > 1
  end

  def self.stdev(values)
    return nil if values.size < 2

    mean = values.sum / values.size.to_f
    Math.sqrt(values.sum { |v| (v - mean)**2 } / (values.size - 1))
  end
end

require_relative "bench/process_tree"
require_relative "bench/servers"
require_relative "bench/server_process"
require_relative "bench/load"
require_relative "bench/latency_client"
require_relative "bench/slow_clients"
require_relative "bench/held_connections"
require_relative "bench/probe_client"
require_relative "bench/measurements"
require_relative "bench/held_measurements"
require_relative "bench/kept_alive_load"
require_relative "bench/proxies"
require_relative "bench/quit_measurement"
require_relative "bench/scenarios"
require_relative "bench/held_scenarios"
require_relative "bench/markdown"
require_relative "bench/svg_chart"
require_relative "bench/results"
require_relative "bench/runner"
