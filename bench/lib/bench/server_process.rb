# frozen_string_literal: true

module Bench
  # One running server: started fresh for each measurement, stopped by pid.
  class ServerProcess
    START_TIMEOUT = 60
    STOP_TIMEOUT = 10
    # The process tree must hold still this long before it counts as booted.
    SETTLE = 0.5

    attr_reader :pid, :launch, :server

    def initialize(server, launch)
      @server = server
      @launch = launch
      @log = File.join(launch.dir, "#{server.name}.log")
      env, argv = server.command(launch)
      @pid = Process.spawn(env, *argv, chdir: ROOT, in: File::NULL, out: @log, err: %i[child out],
                                       pgroup: true)
      @spawned = @pid
    end

    # The end of the server's output, for failure messages.
    LOG_TAIL = 4000

    def log
      text = File.exist?(@log) ? File.read(@log) : ""
      text.size > LOG_TAIL ? text[-LOG_TAIL..] : text
    end

    # Waits until the port accepts connections and the process tree has stopped growing.
    def wait_ready
      Bench.wait_until(START_TIMEOUT, "#{server.name} to listen on #{launch.port}") do
        raise "#{server.name} exited while starting:\n#{log}" unless alive?

        accepting?
      end
      settle
      self
    end

    def settle
      last = nil
      since = Bench.now
      Bench.wait_until(START_TIMEOUT, "#{server.name}'s processes to settle") do
        tree = ProcessTree.pids(@pid).sort
        since = Bench.now unless tree == last
        last = tree
        Bench.now - since >= SETTLE
      end
    end

    def accepting?
      Socket.tcp(HOST, launch.port, connect_timeout: 1).close
      true
    rescue SystemCallError, IOError
      false
    end

    def alive?
      ProcessTree.alive?(@pid)
    end

    def pids
      ProcessTree.pids(@pid)
    end

    # The processes that serve requests: the leaves of the tree, or the only process.
    def workers
      tree = pids
      leaves = tree.reject { |p| tree.any? { |q| ProcessTree.ppid(q) == p } }
      leaves.empty? ? [@pid] : leaves
    end

    # After a re-exec the new master is not our child; the pid file says which it is.
    def adopt(pid)
      @pid = pid
    end

    # TERM, then KILL the whole group if the server has not exited in time.
    def stop
      signal("TERM")
      done = begin
        Bench.wait_until(STOP_TIMEOUT, "#{server.name} to stop") { reap; !alive? }
      rescue RuntimeError
        false
      end
      kill_group unless done
      reap
    end

    # Every process the server started has exited (its master reaped):
    # none of its process group is left.
    def exited?
      reap
      Process.kill(0, -@spawned)
      false
    rescue Errno::ESRCH
      true
    end

    def signal(sig, pid = @pid)
      Process.kill(sig, pid)
    rescue Errno::ESRCH
      nil
    end

    private

    def kill_group
      Process.kill("KILL", -@spawned)
    rescue Errno::ESRCH, Errno::EPERM
      nil
    ensure
      Bench.wait_until(STOP_TIMEOUT, "#{server.name}'s group to die") { reap; ProcessTree.pids(@pid).none? }
    end

    # Collects the process we spawned once it has exited, so that it does not
    # linger as a zombie (a re-executed master is not our child).
    def reap
      Process.waitpid(@spawned, Process::WNOHANG)
    rescue Errno::ECHILD
      nil
    end
  end
end
