# frozen_string_literal: true

require_relative "client_loop"

module Narwhal
  # A server deployed as an operator deploys it: a release (config.ru) in
  # a directory, a pid file, the app on a Unix socket and a control port;
  # a new release written over it, USR2, and what clients and probes see
  # meanwhile. Include it in a Minitest::Test; its teardown stops the
  # masters a deploy started (@extra_pids) and the server.
  module UpgradeDeploy
    include ClientLoop

    # A release that says which one it is, on every path.
    def release(name, status: 200)
      "run ->(_env) { [#{status}, { 'content-type' => 'text/plain' }, ['release #{name}']] }\n"
    end

    def teardown
      @extra_pids&.each do |pid|
        Process.kill(:KILL, pid)
      rescue Errno::ESRCH
        nil
      end
      @server&.stop
      super
    end

    # Starts release 1 with `workers` workers and the given config lines;
    # preload_app true unless the lines say otherwise (later lines win).
    def start_release(config = "", workers: 2, app: release(1), env: {})
      @dir = Dir.mktmpdir("narwhal-deploy")
      @sock = File.join(@dir, "app.sock")
      @pid_path = File.join(@dir, "narwhal.pid")
      @control_port = TCPServer.open("127.0.0.1", 0) { |s| s.local_address.ip_port }
      @server = ServerProcess.start(
        app: app, lint: false, listen: @sock, workers: workers, env: env,
        config: "worker_processes #{workers}\npreload_app true\npid #{@pid_path.inspect}\n" \
                "control_listen \"127.0.0.1:#{@control_port}\"\n#{config}"
      )
      wait_until(message: "pid file") { read_pid(@pid_path) == @server.pid }
      wait_until(message: "/ready 200") { ready_status == 200 }
    end

    # The next release: the config.ru the new master (or its workers) loads.
    def deploy(app)
      File.write(File.join(@server.dir, "config.ru"), app)
    end

    # The master USR2 started, once the pid file names it (it is stopped
    # by the teardown, whatever happens).
    def new_master(old = @server.pid, timeout: 15)
      pid = wait_until(timeout: timeout, message: "a new master in #{@pid_path}") do
        found = read_pid(@pid_path)
        found if found && found != old
      end
      (@extra_pids ||= []) << pid
      pid
    end

    # Workers of `master` that logged they are ready.
    def ready_workers(master)
      children = @server.worker_pids(master)
      @server.log.scan(/worker=\d+ ready pid=(\d+)/).flatten.map(&:to_i).select { |pid| children.include?(pid) }
    end

    def alive?(pid)
      Process.kill(0, pid)
      !File.read("/proc/#{pid}/stat").split(") ", 2).last.start_with?("Z")
    rescue Errno::ESRCH, Errno::ENOENT
      false
    end

    # One request on the app's socket: the status, or the error instead.
    def get
      sock = UNIXSocket.new(@sock)
      sock.write("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
      RawClient.new(sock).read_response(timeout: 10).status
    ensure
      sock&.close
    end

    # The body of one request on the app's socket.
    def body
      sock = UNIXSocket.new(@sock)
      sock.write("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
      RawClient.new(sock).read_response(timeout: 10).body
    ensure
      sock&.close
    end

    # /ready's status on the control port, or the error instead of one.
    def ready_status
      sock = TCPSocket.new("127.0.0.1", @control_port)
      sock.write("GET /ready HTTP/1.1\r\nHost: x\r\n\r\n")
      return :no_answer_in_10s unless sock.wait_readable(10)

      RawClient.new(sock).read_response(timeout: 10).status
    rescue SystemCallError, IOError => e
      e.class
    ensure
      sock&.close
    end

    # Runs the block while a readiness probe asks /ready at a probe's pace;
    # returns every answer, `after` of them from after the block.
    def probing(after: 20)
      seen = Queue.new
      stop = false
      prober = Thread.new do
        until stop
          seen << ready_status
          sleep 0.02 # a probe's pace, not a synchronisation
        end
      end
      yield seen
      count = seen.size
      wait_until(timeout: 15, message: "probes afterwards") { seen.size >= count + after }
      Array.new(seen.size) { seen.pop }
    ensure
      stop = true
      prober&.join(15)
    end

    # A deploy under load and probes: the block runs while client loops
    # send requests and a probe asks /ready. Returns [statuses, probes].
    def deploying(clients: 2)
      statuses = nil
      probes = probing { statuses = under_load(clients: clients) { yield } }
      [statuses, probes]
    end

    # The old release serves on after a failed deploy: the old master
    # alive, its pid file back under its name, the new master gone.
    def assert_old_release_serves(successor)
      wait_until(timeout: 20, message: "the new master gone\n#{@server.log}") { !alive?(successor) }
      wait_until(message: "the pid file back\n#{@server.log}") { read_pid(@pid_path) == @server.pid }
      refute File.exist?("#{@pid_path}.oldbin")
      assert alive?(@server.pid)
      assert_equal "release 1", body
    end

    def assert_all_200(statuses, what)
      failures = statuses.reject { |s| s == 200 }
      assert_empty failures, "#{failures.tally} of #{statuses.size} #{what}\n#{@server.log}"
    end
  end
end
