# frozen_string_literal: true

module Narwhal
  module System
    # Which process listens on a TCP port or a Unix socket path, read from
    # /proc (Linux), so that "address in use" can name it. Only what this
    # process may read is found: another user's process stays unnamed unless
    # we are root. Runs once, on a failed bind, never while serving.
    module SocketOwner
      LISTEN_STATE = "0A" # TCP_LISTEN in /proc/net/tcp
      MAX_PROCS = 100_000 # bounds the /proc scan on a very busy machine

      # "pid 4242 (narwhal master)", or nil when it cannot be told.
      def self.describe(kind, port_or_path)
        inodes = kind == :unix ? unix_inodes(port_or_path) : tcp_inodes(port_or_path)
        pid = inodes.empty? ? nil : pid_holding(inodes)
        pid && "pid #{pid} (#{command(pid)})"
      rescue SystemCallError, IOError
        nil
      end

      def self.tcp_inodes(port)
        %w[/proc/net/tcp /proc/net/tcp6].flat_map do |table|
          lines(table).filter_map do |fields|
            local, state, inode = fields[1], fields[3], fields[9]
            inode if state == LISTEN_STATE && local.to_s.split(":").last.to_i(16) == port
          end
        end
      end

      def self.unix_inodes(path)
        lines("/proc/net/unix").filter_map { |fields| fields[6] if fields[7] == path }
      end

      def self.lines(table)
        File.readlines(table).drop(1).map(&:split)
      rescue SystemCallError
        []
      end

      def self.pid_holding(inodes)
        wanted = inodes.map { |inode| "socket:[#{inode}]" }
        Dir.glob("/proc/[0-9]*").first(MAX_PROCS).each do |dir|
          Dir.each_child("#{dir}/fd") do |fd|
            return Integer(File.basename(dir)) if wanted.include?(File.readlink("#{dir}/fd/#{fd}"))
          rescue SystemCallError
            next
          end
        rescue SystemCallError
          next # gone, or not ours to read
        end
        nil
      end

      def self.command(pid)
        cmdline = File.read("/proc/#{pid}/cmdline").split("\0").join(" ").strip
        cmdline = File.read("/proc/#{pid}/comm").strip if cmdline.empty?
        cmdline.length > 60 ? "#{cmdline[0, 57]}..." : cmdline
      end
    end
  end
end
