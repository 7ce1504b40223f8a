# frozen_string_literal: true

require "socket"
require "tmpdir"
require "fileutils"
require_relative "open_loop"
require_relative "fleet/namespaces"
require_relative "fleet/instance"
require_relative "fleet/haproxy"

module Narwhal
  # Narwhal instances on one host as on a fleet of hosts: each in a network
  # namespace of its own with its own address (Fleet::Namespaces), behind a
  # real haproxy running examples/haproxy-fleet.cfg with health checks and
  # narwhal's agent-check (Fleet::Haproxy). Used by
  # test/integration/fleet_test.rb and bench/fleet.rb. #stop ends every
  # process by pid and deletes the namespaces, whatever state #start or a
  # test left them in.
  class Fleet
    # Each instance's app: VERSION (its directory) is read once, at load,
    # which takes FLEET_BOOT_SECONDS: "raises" raises there, "unhealthy"
    # answers /up with 500. /stuck never returns on an instance whose
    # directory holds STUCK; /work/MS takes MS milliseconds. The body says
    # who answered and the request's queue time.
    APP = <<~'RU'
      version = File.read("VERSION").strip
      sleep Float(ENV.fetch("FLEET_BOOT_SECONDS", "0"))
      raise "release #{version} does not load" if version == "raises"

      instance = ENV.fetch("FLEET_INSTANCE")
      run lambda { |env|
        path = env["PATH_INFO"]
        return [version == "unhealthy" ? 500 : 200, { "content-type" => "text/plain" }, ["up"]] if path == "/up"

        sleep if path == "/stuck" && File.exist?("STUCK")
        sleep Integer(path[%r{\A/work/(\d+)\z}, 1]) / 1000.0 if path.start_with?("/work/")
        body = "instance=#{instance} version=#{version} queue_time=#{env['narwhal.queue_time']}"
        [200, { "content-type" => "text/plain", "content-length" => body.bytesize.to_s }, [body]]
      }
    RU

    # A whole answer through haproxy.
    Response = Struct.new(:status, :head, :body) do
      def [](field)
        body.to_s[/\b#{field}=(\S+)/, 1]
      end
    end

    def self.now
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end

    # The block's first truthy value, or an error after `timeout` seconds.
    def self.wait_until(timeout, what, interval: 0.02)
      deadline = now + timeout
      loop do
        value = yield
        return value if value
        raise "timed out after #{timeout}s waiting for #{what}" if now > deadline

        sleep interval
      end
    end

    attr_reader :instances, :haproxy

    # config: lines every instance's config file gets; workers: how many
    # each must have ready; agent_inter: haproxy's, in place of the example's.
    def initialize(config:, workers:, size: 3, agent_inter: "200ms", env: {})
      @config = config
      @workers = workers
      @size = size
      @agent_inter = agent_inter
      @env = env
      @instances = []
    end

    def start
      @dir = Dir.mktmpdir("narwhal-fleet")
      @namespaces = Namespaces.new(@size)
      @namespaces.nets.each_with_index do |net, i| # each one kept at once, for #stop
        @instances << Instance.new(i + 1, net, app: APP, config: @config, files: { "VERSION" => "1\n" }, env: @env)
      end
      @instances.each { |instance| instance.wait_ready(@workers) }
      @haproxy = Haproxy.new(@instances.map(&:address), dir: @dir, agent_inter: @agent_inter).start
      wait_for_servers(timeout: 15, what: "every server UP at full weight") do |rows|
        rows.values.all? { |r| r["status"] == "UP" && r["weight"] == "100" }
      end
      self
    rescue Exception # rubocop:disable Lint/RescueException -- nothing half-started is left behind
      stop
      raise
    end

    # Stops haproxy and every instance, deletes the namespaces; each step
    # runs whatever the one before did, and the first error is raised last.
    def stop
      errors = [@haproxy, *@instances].compact.filter_map do |process|
        process.stop
        nil
      rescue StandardError => e
        e
      end
      @namespaces&.delete
      FileUtils.rm_rf(@dir) if @dir
      raise errors.first unless errors.empty?
    end

    # Instance n (1, 2, 3).
    def [](number)
      @instances.fetch(number - 1)
    end

    # Waits until the block accepts haproxy's `show stat` rows of the servers.
    def wait_for_servers(timeout: 10, what: "haproxy's servers")
      rows = nil
      Fleet.wait_until(timeout, what) { yield(rows = haproxy.servers) }
    rescue RuntimeError => e
      shown = rows&.transform_values { |r| r.slice("status", "weight", "check_status", "last_agt") }
      raise e.class, "#{e.message}; haproxy shows #{shown}\n#{haproxy&.log}"
    end

    # Open-loop requests through haproxy (OpenLoop), not started yet.
    def load(rate:, count: 100_000, path: "/", answer_timeout: 15)
      OpenLoop.new("127.0.0.1", haproxy.port, path: path, rate: rate, count: count, answer_timeout: answer_timeout)
    end

    # One request through haproxy on a new connection.
    def get(path = "/", timeout: 15)
      Socket.tcp("127.0.0.1", haproxy.port, connect_timeout: 5) do |sock|
        sock.write("GET #{path} HTTP/1.1\r\nHost: fleet\r\nConnection: close\r\n\r\n")
        raw = read_all(sock, timeout)
        head, body = raw.split("\r\n\r\n", 2)
        Response.new(head.to_s[%r{\AHTTP/1\.[01] (\d{3})}, 1]&.to_i, head, body)
      end
    end

    # `count` requests through haproxy: { instance => [versions it answered with] }.
    def versions(count: 30)
      Array.new(count) { get }.select { |r| r.status == 200 }
                              .group_by { |r| Integer(r["instance"]) }
                              .transform_values { |rs| rs.map { |r| r["version"] }.uniq.sort }
    end

    private

    def read_all(sock, timeout)
      raw = +""
      deadline = Fleet.now + timeout
      while (left = deadline - Fleet.now).positive? && sock.wait_readable(left)
        chunk = sock.read_nonblock(16_384, exception: false)
        break if chunk.nil?

        raw << chunk unless chunk == :wait_readable
      end
      raw
    rescue SystemCallError
      raw
    end
  end
end
