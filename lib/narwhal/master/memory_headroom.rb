# frozen_string_literal: true

module Narwhal
  class Master
    # At boot and on HUP: a cgroup memory limit lower than workers × the
    # master's RSS is a warning. Forked workers start as big as the master
    # (a preloaded app) and grow from there; past the limit the kernel's OOM
    # killer ends a process of the group, with nothing in narwhal's log.
    module MemoryHeadroom
      MIB = 1024 * 1024

      module_function

      # Logs the warning, if any, for this master's RSS.
      def check(logger, workers, cgroup: System::Cgroup.current)
        message = warning(workers, System::ProcessMemory.rss(Process.pid), cgroup: cgroup)
        logger.warn(message) if message
      end

      # The log line, or nil when the limit leaves room (or there is none).
      def warning(workers, rss, cgroup: System::Cgroup.current)
        return nil unless rss

        limit = cgroup.memory_limit
        need = workers * rss
        return nil if limit.value.nil? || need <= limit.value

        "memory limit #{mib(limit.value)} (#{limit.source}) is lower than #{workers} worker(s) x " \
          "#{mib(rss)} master RSS = #{mib(need)}: the kernel may kill workers; " \
          "lower worker_processes or raise the limit"
      end

      def mib(bytes)
        "#{(bytes.to_f / MIB).round(1)} MiB"
      end
    end
  end
end
