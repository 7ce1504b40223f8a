# frozen_string_literal: true

require "fileutils"
require_relative "../server_process"
require_relative "namespaces"

module Narwhal
  class Fleet
    # One narwhal of the fleet, run in its namespace (`ip netns exec`),
    # listening on the namespace's address: the app on APP_PORT, the
    # control listener and haproxy's agent beside it; a pid file in its
    # directory. Its masters change with USR2: #master is the one the pid
    # file names, and #stop ends every master it ever had.
    class Instance
      APP_PORT = 8080
      CONTROL_PORT = 9394
      AGENT_PORT = 9395
      STOP_WAIT = 10 # seconds for the masters to go after INT, then KILL
      NEW_MASTER = /re-executing: new master pid=(\d+)/

      attr_reader :number, :net, :server

      # config: more lines for the config file; files: the app directory's.
      def initialize(number, net, app:, config:, files:, env:)
        @number = number
        @net = net
        @server = ServerProcess.new(app: app, lint: false, listen: nil, config: base_config + config, files: files,
                                    env: env.merge("FLEET_INSTANCE" => number.to_s),
                                    wrapper: Namespaces.wrapper(net))
      end

      def name
        "app#{number}"
      end

      def address
        net.inside
      end

      def dir
        server.dir
      end

      def log
        server.log
      end

      def wait_ready(workers)
        server.wait_ready(workers: workers)
      end

      def pid_path
        File.join(dir, "narwhal.pid")
      end

      # The master the pid file names; nil while it is being renamed.
      def master
        pid = File.read(pid_path).to_i
        pid.positive? ? pid : nil
      rescue Errno::ENOENT
        nil
      end

      # The masters USR2 started, in order.
      def successors
        log.scan(NEW_MASTER).flatten.map(&:to_i)
      end

      def signal(sig, pid = master)
        Process.kill(sig, pid)
      end

      # The next release: read by the app when it loads.
      def deploy(version)
        File.write(File.join(dir, "VERSION"), version)
      end

      def self.alive?(pid)
        !File.read("/proc/#{pid}/stat").split(") ", 2).last.start_with?("Z")
      rescue SystemCallError
        false
      end

      # INT to every master it had (a quick stop, whatever term_graceful
      # says), KILL to the process group after STOP_WAIT: the first master
      # leads it and every later master and worker stays in it. A pid is
      # signalled only while it is in that group (a master that died long
      # ago may have left its pid to another process).
      def stop
        masters = [server.pid, *successors].select { |pid| Instance.alive?(pid) && in_group?(pid) }
        masters.each { |pid| kill(:INT, pid) }
        deadline = Fleet.now + STOP_WAIT
        sleep 0.02 while masters.any? { |pid| Instance.alive?(pid) } && Fleet.now < deadline
        kill(:KILL, -server.pid)
        server.wait_exit(timeout: 5) unless server.exited?
      ensure
        FileUtils.rm_rf(dir)
      end

      private

      def in_group?(pid)
        Integer(File.read("/proc/#{pid}/stat").split(") ", 2).last.split[2]) == server.pid
      rescue SystemCallError
        false
      end

      def kill(sig, pid)
        Process.kill(sig, pid)
      rescue Errno::ESRCH
        nil
      end

      def base_config
        <<~RUBY
          listen "#{address}:#{APP_PORT}"
          control_listen "#{address}:#{CONTROL_PORT}"
          agent_listen "#{address}:#{AGENT_PORT}"
          pid File.join(Dir.pwd, "narwhal.pid")
        RUBY
      end
    end
  end
end
