# frozen_string_literal: true

require "etc"
require "set"

module Bench
  # A server's processes, found through /proc, and their memory.
  module ProcessTree
    module_function

    # +pid+ and all its living descendants.
    def pids(pid)
      parents = Hash.new { |h, k| h[k] = [] }
      Dir.glob("/proc/[0-9]*/stat").each do |path|
        stat = File.read(path)
        # The command name may hold spaces and parentheses: split after the last ')'.
        fields = stat[(stat.rindex(")") + 2)..].split
        next if fields[0] == "Z"

        parents[fields[1].to_i] << path[%r{/proc/(\d+)/}, 1].to_i
      rescue Errno::ENOENT, Errno::ESRCH, NoMethodError
        next
      end
      tree = [pid]
      tree.each { |p| tree.concat(parents[p]) }
      tree.select { |p| alive?(p) }
    end

    def children(pid)
      pids(pid).reject { |p| p == pid }.select { |p| ppid(p) == pid }
    end

    def ppid(pid)
      stat = File.read("/proc/#{pid}/stat")
      stat[(stat.rindex(")") + 2)..].split[1].to_i
    rescue Errno::ENOENT, Errno::ESRCH
      nil
    end

    def alive?(pid)
      stat = File.read("/proc/#{pid}/stat")
      stat[(stat.rindex(")") + 2)] != "Z"
    rescue Errno::ENOENT, Errno::ESRCH
      false
    end

    # User + system CPU time of +pid+ and its descendants, in seconds (a
    # process that exits takes its time with it).
    def cpu_seconds(pid)
      ticks = pids(pid).sum do |p|
        stat = File.read("/proc/#{p}/stat")
        stat[(stat.rindex(")") + 2)..].split.values_at(11, 12).sum(&:to_i)
      rescue Errno::ENOENT, Errno::ESRCH
        0
      end
      ticks / Etc.sysconf(Etc::SC_CLK_TCK).to_f
    end

    # Rss, Pss and Uss (private pages) of one process, in KiB.
    def memory(pid)
      text = File.read("/proc/#{pid}/smaps_rollup")
      kb = ->(field) { text[/^#{field}:\s+(\d+) kB/, 1].to_i }
      { "rss_kb" => kb.call("Rss"), "pss_kb" => kb.call("Pss"),
        "uss_kb" => kb.call("Private_Clean") + kb.call("Private_Dirty") }
    rescue Errno::ENOENT, Errno::ESRCH
      nil
    end

    # How many TCP connections to +port+ (not the listener) +pid+ holds open.
    def client_connections(pid, port)
      inodes = connection_inodes(port)
      Dir.glob("/proc/#{pid}/fd/*").count do |fd|
        inodes.include?(File.readlink(fd)[/\Asocket:\[(\d+)\]\z/, 1])
      rescue Errno::ENOENT
        false
      end
    end

    LISTEN_STATE = "0A"

    # Socket inodes of the connections whose local port is +port+.
    def connection_inodes(port)
      %w[/proc/net/tcp /proc/net/tcp6].flat_map do |table|
        File.readlines(table).drop(1).filter_map do |line|
          f = line.split
          f[9] if f[1].split(":").last.to_i(16) == port && f[3] != LISTEN_STATE
        end
      end.to_set
    end

    SYN_RECV_STATE = "03"
    ESTABLISHED_STATE = "01"

    # The server side of +port+'s connections that no process has taken:
    # half-open ones (SYN_RECV: the handshake not finished, as when the
    # listen queue overflows) and complete ones still in the accept queue
    # (no socket inode yet).
    def untaken_connections(port)
      counts = { "syn_recv" => 0, "unaccepted" => 0 }
      %w[/proc/net/tcp /proc/net/tcp6].each do |table|
        File.readlines(table).drop(1).each do |line|
          f = line.split
          next unless f[1].split(":").last.to_i(16) == port

          counts["syn_recv"] += 1 if f[3] == SYN_RECV_STATE
          counts["unaccepted"] += 1 if f[3] == ESTABLISHED_STATE && f[9] == "0"
        end
      end
      counts
    end

    def total_memory(pid)
      pids(pid).filter_map { |p| memory(p) }.each_with_object(Hash.new(0)) do |m, sum|
        m.each { |k, v| sum[k] += v }
      end
    end
  end

  # Samples a server's total memory in the background; keeps the peaks.
  class MemorySampler
    INTERVAL = 0.5

    def initialize(pid)
      @pid = pid
      @peak = Hash.new(0)
      @thread = Thread.new { sample_until_stopped }
    end

    def stop
      @stop = true
      @thread.join
      { "peak_rss_mb" => mb(@peak["rss_kb"]), "peak_pss_mb" => mb(@peak["pss_kb"]) }
    end

    private

    def sample_until_stopped
      until @stop
        ProcessTree.total_memory(@pid).each { |k, v| @peak[k] = v if v > @peak[k] }
        sleep INTERVAL
      end
    end

    def mb(kb)
      (kb / 1024.0).round(1)
    end
  end
end
