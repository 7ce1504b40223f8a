# frozen_string_literal: true

require "etc"

module Narwhal
  class Configurator
    # `worker_processes :auto` (or WEB_CONCURRENCY=auto): one worker per CPU
    # this process can use. That is the cgroup's CPU quota rounded up (a
    # container limited to 1.5 CPUs gets 2 workers), but never more than the
    # CPUs the process may run on; with no quota, those CPUs (the affinity
    # mask, Cpus_allowed_list in /proc/self/status, which is what `taskset`
    # and cpusets change; Etc.nprocessors when it cannot be read).
    class AutoWorkers
      # count: the worker count; reason: one log line saying why.
      Choice = Struct.new(:count, :reason)

      def self.choose(env = ENV, max: Scoreboard::MAX_SLOTS)
        new(System::Cgroup.current(env), max: max).choose
      end

      def initialize(cgroup, max:)
        @cgroup = cgroup
        @max = max
      end

      def choose
        quota = @cgroup.cpu_quota
        cpus, cpus_source = allowed_cpus
        count, why = if quota.value.nil?
                       [cpus, "no cgroup CPU quota (#{quota.source}); " \
                              "#{cpus} CPU(s) this process may run on (#{cpus_source})"]
                     elsif quota.value.ceil > cpus
                       [cpus, "CPU quota #{cpus_text(quota.value)} (#{quota.source}), " \
                              "but this process may run on #{cpus} CPU(s) only (#{cpus_source})"]
                     else
                       [quota.value.ceil, "CPU quota #{cpus_text(quota.value)} (#{quota.source}), rounded up"]
                     end
        count = count.clamp(1, @max)
        Choice.new(count, "worker_processes :auto chose #{count}: #{why}")
      end

      private

      def cpus_text(value)
        "#{value.denominator == 1 ? value.to_i : value.to_f.round(3)} CPU(s)"
      end

      # [count, where it came from]
      def allowed_cpus
        list = File.foreach(status_path).find { |l| l.start_with?("Cpus_allowed_list:") }&.split(":", 2)&.last&.strip
        count = list && count_cpu_list(list)
        count ? [count, "Cpus_allowed_list #{list}"] : [Etc.nprocessors, "Etc.nprocessors"]
      rescue SystemCallError, IOError
        [Etc.nprocessors, "Etc.nprocessors"]
      end

      def status_path
        File.join(@cgroup.root, "proc/self/status")
      end

      # "0-3,8,10-11" -> 7; nil for anything else
      def count_cpu_list(list)
        ranges = list.split(",").map { |part| part.match(/\A(\d+)(?:-(\d+))?\z/) }
        return nil if ranges.empty? || ranges.any?(&:nil?)

        total = ranges.sum { |m| (m[2] || m[1]).to_i - m[1].to_i + 1 }
        total.positive? ? total : nil
      end
    end
  end
end
