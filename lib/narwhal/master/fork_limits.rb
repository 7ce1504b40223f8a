# frozen_string_literal: true

module Narwhal
  class Master
    # The limits on the number of processes that may have refused a fork,
    # as the log line names them: RLIMIT_NPROC (per user, threads count)
    # and the pids cgroup's pids.max. Read only when a fork was refused.
    module ForkLimits
      # nil when neither is set.
      def self.describe(cgroup: System::Cgroup.current)
        found = []
        soft, = Process.getrlimit(:NPROC)
        found << "RLIMIT_NPROC #{soft} for uid #{Process.uid}" unless soft == Process::RLIM_INFINITY
        pids = cgroup.pids_limit
        found << pids.source if pids.value
        found.empty? ? nil : found.join(", ")
      end
    end
  end
end
