# frozen_string_literal: true

require "test_helper"

# USR2 re-exec (the zero-downtime deploy), its back-out, the pid file dance,
# listener inheritance from systemd, and per-worker listeners.
class UpgradeTest < Minitest::Test
  APP = <<~'RU'
    run lambda { |env| [200, { "content-type" => "text/plain" }, ["pid #{Process.pid}"]] }
  RU

  def teardown
    @extra_pids&.each do |pid|
      Process.kill(:KILL, pid)
    rescue Errno::ESRCH
      nil
    end
    @server&.stop
  end

  def unix_get(path)
    sock = UNIXSocket.new(path)
    sock.write("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    sock.read
  ensure
    sock&.close
  end

  def alive?(pid)
    Process.kill(0, pid)
    !File.read("/proc/#{pid}/stat").include?(") Z ")
  rescue Errno::ESRCH, Errno::ENOENT
    false
  end

  def start_with_pid_file(config = "")
    @dir = Dir.mktmpdir("narwhal-upgrade")
    @sock = File.join(@dir, "narwhal.sock")
    @pid_path = File.join(@dir, "narwhal.pid")
    @server = Narwhal::ServerProcess.start(
      app: APP, listen: @sock, workers: 2,
      config: "worker_processes 2\npreload_app true\npid #{@pid_path.inspect}\n#{config}"
    )
    wait_until(message: "pid file") { File.exist?(@pid_path) }
  end

  def test_usr2_then_quit_of_the_old_master_loses_no_request
    start_with_pid_file
    old = @server.pid
    assert_equal old, File.read(@pid_path).to_i
    results = Queue.new
    stop = false
    client = Thread.new do
      until stop
        begin
          results << (unix_get(@sock).start_with?("HTTP/1.1 200 OK") ? :ok : :bad)
        rescue SystemCallError, IOError => e
          results << e
        end
      end
    end
    wait_until(message: "traffic flowing") { results.size > 20 }

    @server.signal(:USR2)
    wait_until(message: "old pid file renamed") { File.exist?("#{@pid_path}.oldbin") }
    assert_equal old, File.read("#{@pid_path}.oldbin").to_i
    new_pid = wait_until(timeout: 15, message: "new master's pid file") do
      pid = read_pid(@pid_path)
      pid if pid && pid != old && pid.positive?
    end
    (@extra_pids = [new_pid])
    wait_until(timeout: 15, message: "new workers ready") { @server.worker_pids(new_pid).size == 2 }
    assert_match(/inherited addr=#{Regexp.escape(@sock)}/, @server.log)

    @server.signal(:QUIT)
    assert @server.wait_exit(timeout: 15).success?
    served_before = results.size
    wait_until(message: "traffic after the old master left") { results.size > served_before + 20 }
    stop = true
    client.join(10)

    outcomes = []
    outcomes << results.pop until results.empty?
    failures = outcomes.reject { |r| r == :ok }
    assert failures.empty?, "#{failures.size} of #{outcomes.size} requests failed: #{failures.uniq.first(3).inspect}\n#{@server.log}"
    assert File.socket?(@sock), "the old master must leave the socket file to the new one"
    refute File.exist?("#{@pid_path}.oldbin")
    assert_match(/pid #{@server.worker_pids(new_pid).first}|pid \d+/, unix_get(@sock))
  ensure
    stop = true
    client&.join(5)
  end

  def test_usr2_backs_out_when_the_new_master_cannot_boot
    start_with_pid_file
    old = @server.pid
    File.write(File.join(@server.dir, "narwhal.conf.rb"), "worker_processes 'many'\n")
    @server.signal(:USR2)
    wait_until(timeout: 15, message: "back-out logged") { @server.log.include?("old master carries on") }
    assert_match(/narwhal.conf.rb:1: worker_processes expects an Integer/, @server.log)
    assert_match(/re-exec pid=\d+ died \(exit 1\); old master carries on/, @server.log)
    wait_until(message: "pid file restored") { read_pid(@pid_path) == old }
    refute File.exist?("#{@pid_path}.oldbin")
    assert unix_get(@sock).start_with?("HTTP/1.1 200 OK")
    # and a later USR2 is possible again
    File.write(File.join(@server.dir, "narwhal.conf.rb"), "worker_processes 1\npid #{@pid_path.inspect}\n")
    @server.signal(:USR2)
    new_pid = wait_until(timeout: 15, message: "second upgrade") do
      pid = read_pid(@pid_path)
      pid if pid && pid != old && pid.positive?
    end
    @extra_pids = [new_pid]
  end

  def test_a_second_server_refuses_a_live_pid_file
    start_with_pid_file
    other = Narwhal::ServerProcess.new(app: APP, listen: File.join(@dir, "other.sock"),
                                       config: "pid #{@pid_path.inspect}\n")
    status = other.wait_exit(timeout: 15)
    refute status.success?
    assert_match(/names running process #{@server.pid}/, other.log)
  ensure
    other&.stop
  end

  def test_systemd_socket_activation
    listener = TCPServer.new("127.0.0.1", 0)
    port = listener.addr[1]
    dir = Dir.mktmpdir("narwhal-systemd")
    File.write(File.join(dir, "config.ru"), APP)
    root = Narwhal::ServerProcess::ROOT
    # LISTEN_PID must be narwhal's own pid: set it, then exec in place
    launcher = "ENV['LISTEN_PID'] = Process.pid.to_s; ENV['LISTEN_FDS'] = '1'; " \
               "exec(#{RbConfig.ruby.inspect}, '-I', #{File.join(root, 'lib').inspect}, " \
               "#{Narwhal::ServerProcess::EXE.inspect}, '-N', 'config.ru', 3 => 3)"
    log = File.join(dir, "log")
    pid = Process.spawn(RbConfig.ruby, "-e", launcher, 3 => listener, chdir: dir, out: log, err: log)
    @extra_pids = [pid]
    listener.close
    wait_until(timeout: 15, message: "worker ready") { File.read(log).include?("ready") }
    assert_match(/inherited addr=127.0.0.1:#{port}/, File.read(log))
    sock = TCPSocket.new("127.0.0.1", port)
    sock.write("GET / HTTP/1.0\r\n\r\n")
    assert_match(/\AHTTP\/1.1 200 OK/, sock.read)
  ensure
    sock&.close
    Process.kill(:TERM, pid) if pid
    Process.wait(pid) if pid
    @extra_pids = nil
  end

  def test_per_worker_listener_from_after_fork_retries_until_the_port_frees
    blocker = TCPServer.new("127.0.0.1", 0)
    port = blocker.addr[1]
    @server = Narwhal::ServerProcess.new(app: APP, config: <<~CONF)
      after_fork do |server, worker|
        server.listen("127.0.0.1:#{port}", tries: -1, delay: 0.1)
      end
    CONF
    wait_until(timeout: 15, message: "retry logged") { @server.log.include?("127.0.0.1:#{port} in use, retrying") }
    blocker.close
    @server.wait_ready
    sock = TCPSocket.new("127.0.0.1", port)
    sock.write("GET / HTTP/1.0\r\n\r\n")
    assert_match(/\AHTTP\/1.1 200 OK/, sock.read)
  ensure
    sock&.close
    blocker&.close unless blocker&.closed?
  end

  # A parent's listeners in UNICORN_FD: the one the config names is kept,
  # the other is closed.
  def test_unicorn_fd_inherited_listener_kept_when_named_closed_when_not
    kept = TCPServer.new("127.0.0.1", 0)
    dropped = TCPServer.new("127.0.0.1", 0)
    dir = Dir.mktmpdir("narwhal-inherit")
    File.write(File.join(dir, "config.ru"), APP)
    File.write(File.join(dir, "n.conf.rb"), "listen '127.0.0.1:#{kept.addr[1]}'\n")
    log = File.join(dir, "log")
    root = Narwhal::ServerProcess::ROOT
    pid = Process.spawn({ "UNICORN_FD" => "#{kept.fileno},#{dropped.fileno}" },
                        RbConfig.ruby, "-I", File.join(root, "lib"), Narwhal::ServerProcess::EXE, "-N",
                        "-c", "n.conf.rb", "config.ru",
                        kept.fileno => kept.fileno, dropped.fileno => dropped.fileno,
                        chdir: dir, out: log, err: log)
    @extra_pids = [pid]
    port = kept.addr[1]
    dropped_port = dropped.addr[1]
    kept.close
    dropped.close
    wait_until(timeout: 15, message: "worker ready") { File.read(log).include?("ready") }
    assert_match(/inherited addr=127.0.0.1:#{port}/, File.read(log))
    assert_match(/closing inherited addr=127.0.0.1:#{dropped_port}: not in the configuration/, File.read(log))
    refute_match(/listening on/, File.read(log))
    sock = TCPSocket.new("127.0.0.1", port)
    sock.write("GET / HTTP/1.0\r\n\r\n")
    assert_match(%r{\AHTTP/1.1 200 OK}, sock.read)
    assert_raises(Errno::ECONNREFUSED) { TCPSocket.new("127.0.0.1", dropped_port) }
  ensure
    sock&.close
    Process.kill(:TERM, pid) if pid
    Process.wait(pid) if pid
    @extra_pids = nil
  end

  # The layout of a Capistrano-style deploy run with examples/unicorn.conf.rb
  # as it is: the config in ROOT/config/, started from ROOT with a relative
  # `-c config/unicorn.rb`, working_directory ROOT/current (a symlink to the
  # release), logs and pids shared between releases. A deploy moves the
  # symlink and sends USR2: the new master must find the config from its
  # new directory, load the new release, and retire the old master.
  def test_usr2_with_a_relative_config_path_and_working_directory_loads_the_new_release
    root = Dir.mktmpdir("narwhal-deploy")
    FileUtils.mkdir_p(File.join(root, "config"))
    FileUtils.cp(File.join(Narwhal::ServerProcess::ROOT, "examples", "unicorn.conf.rb"),
                 File.join(root, "config", "unicorn.rb"))
    %w[shared/tmp/sockets shared/tmp/pids shared/log].each { |d| FileUtils.mkdir_p(File.join(root, d)) }
    %w[1 2].each do |release|
      dir = File.join(root, "releases", release)
      FileUtils.mkdir_p(dir)
      File.write(File.join(dir, "config.ru"), "run ->(_env) { [200, { 'content-type' => 'text/plain' }, ['release #{release}']] }\n")
      File.symlink("../../shared/tmp", File.join(dir, "tmp"))
      File.symlink("../../shared/log", File.join(dir, "log"))
    end
    File.symlink("releases/1", File.join(root, "current"))
    health, worker_base = free_ports(2)
    env = { "APP_ROOT" => File.join(root, "current"), "WEB_CONCURRENCY" => "1", "HEALTH_PORT" => health.to_s,
            "WORKER_BASE_PORT" => worker_base.to_s, "RUBYLIB" => File.join(Narwhal::ServerProcess::ROOT, "lib") }
    pid_path = File.join(root, "shared/tmp/pids/unicorn.pid")
    out = File.join(root, "launcher.out")
    launcher = Process.spawn(env, RbConfig.ruby, Narwhal::ServerProcess::EXE, "-D", "-E", "production",
                             "-c", "config/unicorn.rb", chdir: root, out: out, err: out)
    _, status = Timeout.timeout(30) { Process.wait2(launcher) }
    assert status.success?, File.read(out)
    old = read_pid(pid_path)
    @extra_pids = [old]
    assert_equal "release 1", http_get(health)

    File.symlink("releases/2", File.join(root, "current.new"))
    File.rename(File.join(root, "current.new"), File.join(root, "current")) # the deploy
    Process.kill(:USR2, old)
    log = -> { File.read(File.join(root, "shared/log/unicorn.stderr.log")) }
    new_pid = wait_until(timeout: 30, message: "a new master\n#{log.call}") do
      pid = read_pid(pid_path)
      pid if pid && pid != old
    end
    @extra_pids << new_pid
    # the example's before_fork sends QUIT to the old master
    wait_until(timeout: 30, message: "the old master gone\n#{log.call}") { !alive?(old) }
    assert_equal "release 2", http_get(health)
    assert alive?(new_pid)
    # the old master watched the new master itself, not a launcher that exits
    assert_includes log.call, "re-executing: new master pid=#{new_pid}\n"
    refute_match(/re-exec pid=\d+ died/, log.call)
  ensure
    FileUtils.rm_rf(root) if root
  end

  def free_ports(count)
    servers = Array.new(count) { TCPServer.new("127.0.0.1", 0) }
    servers.map { |s| s.addr[1] }.tap { servers.each(&:close) }
  end

  def http_get(port)
    sock = TCPSocket.new("127.0.0.1", port)
    sock.write("GET / HTTP/1.0\r\n\r\n")
    sock.read.split("\r\n\r\n", 2).last
  ensure
    sock&.close
  end

  # /ready's status on a control port, or the error instead of one.
  def ready_status(port)
    sock = TCPSocket.new("127.0.0.1", port)
    sock.write("GET /ready HTTP/1.1\r\nHost: x\r\n\r\n")
    return :no_answer_in_10s unless sock.wait_readable(10)

    Narwhal::RawClient.new(sock).read_response(timeout: 10).status
  rescue SystemCallError, IOError => e
    e.class
  ensure
    sock&.close
  end

  # A readiness probe (the kubelet's, a load balancer's) on control_listen
  # while the new generation takes over: every answer is 200, none a 503 of
  # the leaving master or a refused connection.
  def test_ready_stays_200_across_usr2_and_quit_of_the_old_master
    port = TCPServer.open("127.0.0.1", 0) { |s| s.local_address.ip_port }
    start_with_pid_file(%(control_listen "127.0.0.1:#{port}"\n))
    old = @server.pid
    wait_until(message: "ready") { ready_status(port) == 200 }
    seen = Queue.new
    stop = false
    prober = Thread.new do
      until stop
        seen << ready_status(port)
        sleep 0.02 # a probe's pace
      end
    end
    @server.signal(:USR2)
    new_pid = wait_until(timeout: 15, message: "new master") do
      pid = read_pid(@pid_path)
      pid if pid && pid != old
    end
    @extra_pids = [new_pid]
    wait_until(timeout: 15, message: "new workers ready") do
      @server.log.scan(/worker=\d+ ready pid=(\d+)/).flatten.map(&:to_i).count do |pid|
        @server.worker_pids(new_pid).include?(pid)
      end == 2
    end
    @server.signal(:QUIT)
    @server.wait_exit(timeout: 15)
    after = seen.size
    wait_until(timeout: 15, message: "probes after the old master left") { seen.size >= after + 50 }
    stop = true
    prober.join(10)
    statuses = Array.new(seen.size) { seen.pop }
    assert_equal [200], statuses.uniq, "#{statuses.tally} of #{statuses.size} probes"
    assert_equal 200, ready_status(port), "the new master answers"
  end
end
