# frozen_string_literal: true

require "rbconfig"

module Narwhal
  # Starts a real `narwhal` process on a free loopback port (port 0; the port
  # is read back from the "listening on" log line) and stops it by pid.
  class ServerProcess
    ROOT = File.expand_path("../..", __dir__)
    EXE = File.join(ROOT, "exe", "narwhal")
    LISTEN_LINE = /listening on addr=(\S+) fd=/
    READY_LINE = /worker=\d+ ready pid=\d+/

    attr_reader :pid, :dir, :log_path

    # app: the text of a config.ru; config: the text of a -c file or nil;
    # lint: wrap the app in Rack::Lint (default true); wrapper: a command
    # that runs narwhal by exec'ing its arguments (the pid stays narwhal's);
    # files: more files for the app's directory, { "name" => "text" };
    # listen: nil when the config file's `listen` lines say where;
    # dir_mode: the app directory's mode, for a server run as another user;
    # root: the tree whose lib/ and exe/ run (a copy that user can read).
    def initialize(app:, config: nil, args: [], lint: true, listen: "127.0.0.1:0", env: {}, wrapper: [], files: {},
                   dir_mode: nil, root: ROOT)
      @dir = Dir.mktmpdir("narwhal-test")
      File.chmod(dir_mode, @dir) if dir_mode
      files.each { |name, text| File.write(File.join(@dir, name), text) }
      @log_path = File.join(@dir, "server.log")
      ru = File.join(@dir, "config.ru")
      File.write(ru, lint ? "require 'rack/lint'\nuse Rack::Lint\n#{app}" : app)
      # -N: the tests' own Rack::Lint is the only middleware (a second Lint
      # from development's defaults breaks on to_ary bodies)
      argv = [*wrapper, RbConfig.ruby, "-I", File.join(root, "lib"), File.join(root, "exe", "narwhal"), "-N"]
      argv += ["-l", listen] if listen
      if config
        File.write(File.join(@dir, "narwhal.conf.rb"), config)
        argv += ["-c", File.join(@dir, "narwhal.conf.rb")]
      end
      argv += args
      argv << ru
      # RUBYLIB too: a USR2 re-exec runs exe/narwhal again without our -I
      env = { "RUBYLIB" => File.join(root, "lib") }.merge(env)
      @pid = Process.spawn(env, *argv, chdir: @dir, out: @log_path, err: @log_path, pgroup: true)
    end

    def self.start(workers: 1, **kw)
      server = new(**kw)
      server.wait_ready(workers: workers)
      server
    end

    # Waits until the master listens and `workers` workers said they are ready.
    def wait_ready(timeout: 15, workers: 1)
      deadline = now + timeout
      until (m = log.match(LISTEN_LINE)) && log.scan(READY_LINE).size >= workers
        raise "narwhal exited early:\n#{log}" if exited?
        raise "narwhal did not start in #{timeout}s:\n#{log}" if now > deadline

        sleep 0.01
      end
      @address = m[1]
      self
    end

    def host
      @address[/\A\[?([^\]]+?)\]?:\d+\z/, 1]
    end

    def port
      Integer(@address[/:(\d+)\z/, 1])
    end

    def log
      File.exist?(@log_path) ? File.read(@log_path) : ""
    end

    # Sockets and served files the process holds open: what a leaked client
    # connection would leave behind. Other descriptors (Ruby's own pipes,
    # eventfds, the log) come and go with start-up and are not counted.
    # Counted in the workers, which hold the connections.
    def connection_fds
      worker_pids.sum do |wpid|
        Dir.children("/proc/#{wpid}/fd").count do |fd|
          target = File.readlink("/proc/#{wpid}/fd/#{fd}")
          target.start_with?("socket:") || target.end_with?(".bin", "(deleted)")
        rescue SystemCallError
          false
        end
      rescue SystemCallError
        0
      end
    end

    # Pids of the master's live children (its workers), from /proc.
    def worker_pids(master = @pid)
      self.class.children_of(master)
    end

    def self.children_of(parent)
      Dir.glob("/proc/[0-9]*/stat").filter_map do |stat|
        fields = File.read(stat).split(") ", 2).last.split
        pid = Integer(stat[%r{/proc/(\d+)/}, 1])
        pid if fields[1].to_i == parent && fields[0] != "Z"
      rescue SystemCallError
        nil
      end.sort
    end

    # For a server the tests of a class share: stopped once the run ends,
    # not as a leftover of the test that started it.
    def stop_after_run
      LeftoverProcesses.keep(@pid)
      Minitest.after_run { stop }
      self
    end

    def exited?
      return true if @status

      _, @status = Process.waitpid2(@pid, Process::WNOHANG)
      !@status.nil?
    end

    attr_reader :status

    def signal(sig)
      Process.kill(sig, @pid)
    end

    def wait_exit(timeout: 10)
      deadline = now + timeout
      until exited?
        raise "narwhal pid #{@pid} still running after #{timeout}s" if now > deadline

        sleep 0.01
      end
      @status
    end

    def stop
      unless exited?
        signal(:TERM)
        begin
          wait_exit(timeout: 5)
        rescue RuntimeError
          Process.kill(:KILL, -@pid) # the whole group: master and workers
          wait_exit
        end
      end
      FileUtils.rm_rf(@dir)
    rescue Errno::ESRCH
      nil
    end

    def connect
      RawClient.new(TCPSocket.new(host, port))
    end

    # One GET on a new connection (Connection: close): its response.
    def get(path, timeout: 15)
      client = connect
      client.write("GET #{path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
      client.read_response(timeout: timeout)
    ensure
      client&.close
    end

    # The body of GET path from the control listener (control_listen), at
    # the address its start-up line says.
    def control_get(path)
      address = log[/control listener on (\S+)/, 1] or raise "no control listener:\n#{log}"
      host, port = address.split(/:(?=\d+\z)/)
      TCPSocket.open(host, Integer(port)) do |s|
        s.write("GET #{path} HTTP/1.1\r\nHost: c\r\nConnection: close\r\n\r\n")
        s.read.split("\r\n\r\n", 2).last
      end
    end

    private

    def now
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end
  end
end
