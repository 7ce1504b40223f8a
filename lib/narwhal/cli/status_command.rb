# frozen_string_literal: true

require "json"
require "optparse"
require "socket"

module Narwhal
  class CLI
    # `narwhal status`: asks a running master's control listener for
    # GET /status and prints its workers as a table (or the JSON itself).
    #
    #   narwhal status -c /etc/narwhal.rb        # the file's control_listen
    #   narwhal status --control 127.0.0.1:9394  # or a Unix socket path
    #
    # The master's data lives in its memory and the workers' shared mapping,
    # which no other process can read: the control listener is the way in,
    # so the server needs `control_listen`.
    class StatusCommand
      TIMEOUT = 5 # seconds for the whole exchange

      def self.start(argv, out: $stdout, err: $stderr)
        new(argv, out: out, err: err).run
      end

      def initialize(argv, out:, err:)
        @argv = argv.dup
        @out = out
        @err = err
        @address = nil
        @config_file = nil
        @json = false
      end

      # The exit status: 0 when the table was printed, 1 otherwise.
      def run
        parse_options
        address = @address || address_from_config
        body = fetch(address)
        @out.puts(@json ? body : table(JSON.parse(body)))
        0
      rescue ConfigError, OptionParser::ParseError, JSON::ParserError => e
        @err.puts e.message.gsub(/^/, "narwhal status: ")
        1
      rescue SystemCallError, IOError, SocketError, ArgumentError => e
        @err.puts "narwhal status: no answer from the control listener: #{ErrorMessage.for(e)}"
        1
      end

      # The status Hash (Master::Control::Status#to_h, parsed) as lines of text.
      def table(status)
        rows = status["workers"].map { |w| row(w, status["threads"]) }
        header = %w[worker pid state requests busy age request rss]
        widths = header.each_index.map { |i| ([header] + rows).map { |r| r[i].length }.max }
        lines = [summary(status), events(status["events"]), ""].compact
        ([header] + rows).each do |r|
          lines << r.each_with_index.map { |cell, i| i == 6 ? cell.ljust(widths[i]) : cell.rjust(widths[i]) }
                    .join("  ").rstrip
        end
        lines.join("\n")
      end

      private

      def parse_options
        OptionParser.new do |o|
          o.banner = "Usage: narwhal status [--control ADDR | -c CONFIG_FILE] [--json]"
          o.on("--control ADDR", "the master's control_listen address (host:port or a socket path)") { |a| @address = a }
          o.on("-c", "--config-file FILE", "read control_listen from this config file") { |f| @config_file = f }
          o.on("--json", "print GET /status as it came") { @json = true }
        end.parse!(@argv)
        raise OptionParser::InvalidArgument, @argv.join(" ") unless @argv.empty?
      end

      def address_from_config
        raise ConfigError, "give --control ADDR or -c CONFIG_FILE (with control_listen)" unless @config_file

        address = Configurator.new(file: @config_file)[:control_listen]
        raise ConfigError, "#{@config_file} has no control_listen: the master has no control listener" unless address

        address
      end

      def fetch(address)
        kind, host, port = Listener.parse(address)
        sock = kind == :unix ? UNIXSocket.new(host) : Socket.tcp(host == "0.0.0.0" ? "127.0.0.1" : host, port,
                                                                 connect_timeout: TIMEOUT)
        sock.write("GET /status HTTP/1.1\r\nhost: narwhal\r\nconnection: close\r\n\r\n")
        response = read_all(sock)
        head, body = response.split("\r\n\r\n", 2)
        code = head.to_s[%r{\AHTTP/1\.1 (\d+)}, 1]
        raise IOError, "unexpected answer #{head.to_s.lines.first.inspect}" unless code == "200"

        body
      ensure
        sock&.close
      end

      def read_all(sock)
        deadline = Clock.now + TIMEOUT
        data = +""
        loop do
          chunk = sock.read_nonblock(65_536, exception: false)
          break if chunk.nil?

          if chunk == :wait_readable
            left = deadline - Clock.now
            raise IOError, "no answer within #{TIMEOUT}s" if left <= 0 || !sock.wait_readable(left)
          else
            data << chunk
          end
        end
        data
      end

      def summary(status)
        workers = status["workers"]
        states = workers.group_by { |w| w["state"] }.map { |s, ws| "#{ws.size} #{s}" }
        queues = status["listeners"].map { |l| "#{l['address']} #{l['queue'] || '?'}/#{l['queue_max'] || '?'}" }
        uptime = status["uptime_seconds"] && ", up #{duration(status['uptime_seconds'])}"
        "master pid=#{status['pid']} #{status['ready'] ? 'ready' : 'not ready'}" \
          "#{status['draining'] ? ' (draining)' : ''}#{uptime}; workers: #{states.join(', ')}; " \
          "#{capacity(workers, status['threads'])}listen queue: #{queues.join(', ')}"
      end

      # Busy threads of how many: those of the workers that serve, each with
      # its own count (a HUP may have changed `threads` since it was forked).
      def capacity(workers, threads)
        return "" unless threads

        counts = workers.select { |w| Master::Control::Status.serving?(w) }.map { |w| w["threads"] || threads }
        busy = workers.sum { |w| w["busy_threads"].to_i }
        split = counts.uniq.size > 1 ? counts.join(" + ") : "#{counts.size} x #{counts.first || threads}"
        "threads: #{busy} of #{counts.sum} busy (#{split}); "
      end

      # The master's Tally: workers replaced, and why.
      def events(counts)
        return nil unless counts

        recycles = counts.values_at("memory_recycles", "request_recycles").map(&:to_i)
        "since start: #{counts['respawns'].to_i} respawned, #{counts['timeout_kills'].to_i} killed for timeout, " \
          "#{recycles.sum} recycled (#{recycles[0]} for memory, #{recycles[1]} for requests)"
      end

      # The two largest units: "45s", "5m 3s", "2h 5m", "3d 4h".
      def duration(seconds)
        s = seconds.to_i
        return "#{s}s" if s < 60
        return "#{s / 60}m #{s % 60}s" if s < 3600
        return "#{s / 3600}h #{s % 3600 / 60}m" if s < 86_400

        "#{s / 86_400}d #{s % 86_400 / 3600}h"
      end

      def row(worker, threads)
        request = worker["request"]
        of = worker["threads"] || threads
        busy = of ? "#{worker['busy_threads']}/#{of}" : worker["busy_threads"].to_s
        [worker["nr"].to_s, worker["pid"].to_s, worker["state"], worker["requests"].to_s,
         busy, request ? format("%.1fs", request["seconds"]) : "-",
         request ? [request["method"], request["path"]].compact.join(" ") : "-", mib(worker["rss_bytes"])]
      end

      def mib(bytes)
        bytes ? format("%.1f MiB", bytes / 1_048_576.0) : "?"
      end
    end
  end
end
