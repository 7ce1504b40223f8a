# frozen_string_literal: true

require "etc"

module Narwhal
  module System
    # How much memory a process uses, from Linux's /proc, in bytes; nil when
    # the process is gone or /proc cannot tell (another OS).
    #
    # RSS counts every resident page, shared copy-on-write pages included, so
    # forked workers of a preloaded app look bigger than they cost; PSS splits
    # each shared page between the processes that share it (slower to read:
    # the kernel walks the page tables).
    module ProcessMemory
      PAGE_SIZE = begin
        Etc.sysconf(Etc::SC_PAGESIZE)
      rescue StandardError
        4096
      end

      module_function

      # Resident set size: the second field of /proc/PID/statm, in pages.
      def rss(pid)
        pages = File.read("/proc/#{pid}/statm").split(" ", 3)[1]
        pages && Integer(pages) * PAGE_SIZE
      rescue SystemCallError, IOError, ArgumentError
        nil
      end

      # Proportional set size, from /proc/PID/smaps_rollup (Linux 4.14+).
      def pss(pid)
        line = File.foreach("/proc/#{pid}/smaps_rollup").find { |l| l.start_with?("Pss:") }
        line && Integer(line.split[1]) * 1024
      rescue SystemCallError, IOError, ArgumentError
        nil
      end
    end
  end
end
