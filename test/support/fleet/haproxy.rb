# frozen_string_literal: true

require "socket"
require_relative "../example_file"

module Narwhal
  class Fleet
    # haproxy in this (the root) namespace running examples/haproxy-fleet.cfg
    # itself, with the fleet's addresses, a port and a stats socket of its
    # own and a shorter agent-inter put in; and what it shows on its stats
    # socket.
    class Haproxy
      EXAMPLE = "haproxy-fleet.cfg"
      COMMAND = ["/usr/sbin/haproxy", "haproxy"].find { |n| system("command -v #{n} >/dev/null 2>&1") }

      attr_reader :port, :pid, :log_path

      # addresses: the servers' in order (app1, app2, ...).
      def initialize(addresses, dir:, agent_inter: "200ms")
        raise "haproxy is required (bin/setup installs it)" unless COMMAND

        @dir = dir
        @port = TCPServer.open("127.0.0.1", 0) { |s| s.local_address.ip_port }
        @stats = File.join(dir, "haproxy-admin.sock")
        @log_path = File.join(dir, "haproxy.log")
        replacements = { "bind :80" => "bind 127.0.0.1:#{@port}", "/run/haproxy/admin.sock" => @stats,
                         "agent-inter 1s" => "agent-inter #{agent_inter}" }
        addresses.each_with_index { |ip, i| replacements["10.0.0.1#{i + 1}:8080"] = "#{ip}:8080" }
        @config = ExampleFile.write(EXAMPLE, dir, replacements)
      end

      def start
        @pid = Process.spawn(COMMAND, "-f", @config, "-db", out: @log_path, err: @log_path)
        Fleet.wait_until(15, "haproxy's stats socket\n#{log}") do
          raise "haproxy exited:\n#{log}" if Process.wait(@pid, Process::WNOHANG)

          File.socket?(@stats) && servers.any?
        rescue SystemCallError
          false
        end
        self
      end

      def stop
        return unless @pid

        Process.kill(:TERM, @pid)
        Process.wait(@pid)
      rescue Errno::ESRCH, Errno::ECHILD
        nil
      ensure
        @pid = nil
      end

      def log
        File.exist?(@log_path) ? File.read(@log_path) : ""
      end

      # Request lines of its log (option httplog) for requests it did not
      # pass on cleanly: a termination state other than ---- (haproxy cut
      # or answered the request itself: a timeout, a reset, no server) or a
      # retry (the last counter, "+1" when redispatched), which would hide
      # a connect the server refused.
      def troubled_requests
        log.lines.select { |l| l.include?(' "GET ') }.grep_v(%r{ ---- \d+/\d+/\d+/\d+/0 })
      end

      # One command on the stats socket: its answer.
      def command(text)
        UNIXSocket.open(@stats) do |sock|
          sock.write("#{text}\n")
          sock.read
        end
      end

      # `show stat` of the backend: { "app1" => { "status" => "UP", "weight" => "100", ... }, ... }
      def servers
        header, *rows = command("show stat").lines.map { |l| l.chomp.split(",", -1) }
        fields = [header.first.delete_prefix("# "), *header.drop(1)]
        rows.select { |r| r[0] == "narwhal" && r[1] != "BACKEND" && r[1] != "FRONTEND" }
            .to_h { |r| [r[1], fields.zip(r).to_h] }
      end

      # "app1" => "UP", ...
      def states
        servers.transform_values { |row| row["status"] }
      end

      # Samples every server's state and weight every `interval` seconds
      # while the block runs: [[monotonic time, { "app1" => ["UP", 100], ... }], ...].
      def watch(interval: 0.05)
        samples = []
        stop = false
        sampler = Thread.new do
          until stop
            samples << [Fleet.now, servers.transform_values { |row| [row["status"], Integer(row["weight"])] }]
            sleep interval # a sampling pace, not a synchronisation
          end
        end
        yield samples
        samples
      ensure
        stop = true
        sampler&.join(5)
      end
    end
  end
end
