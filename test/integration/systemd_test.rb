# frozen_string_literal: true

require "test_helper"
require "open3"
require "support/example_file"

# examples/systemd: the committed units, with their paths pointed at a
# temporary app, pass `systemd-analyze verify` (and a broken copy does not);
# narwhal takes the socket `systemd-socket-activate` passes it, run by hand
# and as the unit's own ExecStart=; USR2 leaves PIDFile= naming the live
# master, which is what systemd follows; and a socket file systemd made
# outlives narwhal's exit.
class SystemdTest < Minitest::Test
  ROOT = Narwhal::ServerProcess::ROOT
  ACTIVATE = "/usr/bin/systemd-socket-activate"
  ANALYZE = "/usr/bin/systemd-analyze"
  APP = "run ->(env) { [200, { 'content-type' => 'text/plain' }, [\"pid \#{Process.pid}\"]] }\n"

  def setup
    @dir = Dir.mktmpdir("narwhal-systemd")
    @app = File.join(@dir, "app")
    @units = File.join(@dir, "units")
    [@app, "#{@app}/bin", "#{@app}/config", @units, "#{@dir}/run", "#{@dir}/log"].each { |d| FileUtils.mkdir_p(d) }
    @sock = File.join(@dir, "narwhal.sock")
    # the unit's paths, longest first where one is a prefix of another
    @paths = { "/run/narwhal.sock" => @sock, "/run/narwhal" => "#{@dir}/run",
               "/var/log/narwhal" => "#{@dir}/log", "/srv/app/current" => @app }
    File.write(File.join(@app, "config.ru"), APP)
    File.write(File.join(@app, "Gemfile"), "")
    # a binstub, as `bundle binstubs narwhal` makes: USR2 re-executes it
    binstub = File.join(@app, "bin", "narwhal")
    File.write(binstub, "#!#{RbConfig.ruby}\n$LOAD_PATH.unshift(#{File.join(ROOT, 'lib').inspect})\n" \
                        "load #{Narwhal::ServerProcess::EXE.inspect}\n")
    File.chmod(0o755, binstub)
    Narwhal::ExampleFile.write("systemd/narwhal.rb", File.join(@app, "config"), @paths)
    @service = Narwhal::ExampleFile.write("systemd/narwhal.service", @units,
                                          @paths.slice("/run/narwhal", "/var/log/narwhal", "/srv/app/current"))
    @socket = Narwhal::ExampleFile.write("systemd/narwhal.socket", @units, @paths.slice("/run/narwhal.sock"))
    @pids = []
  end

  def teardown
    masters = @service ? [pid_file, "#{pid_file}.oldbin"].filter_map { |f| read_pid(f) } : []
    (masters + @pids).each do |pid|
      Process.kill(:KILL, pid)
    rescue Errno::ESRCH
      nil
    end
    @pids.each { |pid| Process.wait(pid) rescue nil } # rubocop:disable Style/RescueModifier
    FileUtils.rm_rf(@dir)
  end

  # --- the unit files ---

  # Values of `key=` in a unit file, comments ignored.
  def unit_values(path, key)
    File.readlines(path, chomp: true).filter_map { |l| l.split("=", 2)[1] if l.start_with?("#{key}=") }
  end

  def pid_file
    unit_values(@service, "PIDFile").first
  end

  def exec_start
    unit_values(@service, "ExecStart").first.split
  end

  def log
    File.read(File.join(@dir, "log", "narwhal.log"))
  rescue Errno::ENOENT
    ""
  end

  # systemd-analyze exits 0 on settings it ignores with a warning (a
  # misspelt value): any line about our files counts as a failure too.
  def verify_problems(*files)
    out, status = Open3.capture2e(ANALYZE, "verify", *files)
    ours = out.lines.grep(/narwhal\.(service|socket)/)
    status.success? && ours.empty? ? nil : out
  end

  def test_the_units_pass_systemd_analyze_verify
    assert_equal "/run/narwhal.sock", File.read(File.join(ROOT, "examples/systemd/narwhal.socket"))[/^ListenStream=(.*)$/, 1]
    problems = verify_problems(@service, @socket)
    assert_nil problems, "systemd-analyze verify:\n#{problems}"
  end

  def test_systemd_analyze_verify_catches_a_broken_unit
    broken = { "KillSignal=SIGQUIT" => "KillSignal=SIGQUITE", "ExecStart=#{@app}/bin/" => "ExecStart=#{@app}/nobin/",
               "Type=forking" => "Tpye=forking" }
    good = File.read(@service)
    broken.each do |from, to|
      File.write(@service, good.sub(/^#{Regexp.escape(from)}/, to))
      refute_equal good, File.read(@service)
      refute_nil verify_problems(@service, @socket), "#{to} passed systemd-analyze verify"
      File.write(@service, good)
    end
    assert_nil verify_problems(@service, @socket)
  end

  # Stop and reload as narwhal's signals want them (docs/SIGNALS.md).
  def test_stop_and_reload_use_narwhals_signals
    assert_equal ["SIGQUIT"], unit_values(@service, "KillSignal"), "QUIT is the graceful stop"
    assert_equal ["mixed"], unit_values(@service, "KillMode")
    assert_equal ["/bin/kill -HUP $MAINPID"], unit_values(@service, "ExecReload")
    timeout = Integer(File.read(File.join(@app, "config", "narwhal.rb"))[/^timeout (\d+)$/, 1])
    stop_sec = Integer(unit_values(@service, "TimeoutStopSec").first)
    assert_operator stop_sec, :>, timeout + Narwhal::Master::KILL_AFTER, "narwhal's own kill comes first"
    assert_equal ["forking"], unit_values(@service, "Type")
    assert_includes exec_start, "-D"
    assert_equal "#{@dir}/run/narwhal.pid", pid_file
    assert_match(/^pid "#{Regexp.escape(pid_file)}"$/, File.read(File.join(@app, "config", "narwhal.rb")))
  end

  # --- systemd-socket-activate ---

  def free_port
    server = TCPServer.new("127.0.0.1", 0)
    server.addr[1]
  ensure
    server&.close
  end

  # systemd-socket-activate binds, then execs the command at the first
  # connection with LISTEN_FDS=1 and LISTEN_PID set to its own pid.
  def activate(address, *command, out: File.join(@dir, "activate.log"))
    pid = Process.spawn(ACTIVATE, "-l", address, *command, chdir: @app, out: out, err: out, pgroup: true)
    @pids << pid
    wait_until(timeout: 10, message: "systemd-socket-activate listening") { File.read(out).include?("Listening on") }
    pid
  end

  def request(sock)
    sock.write("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    raise "no response in 30s" unless sock.wait_readable(30)

    sock.read
  ensure
    sock.close
  end

  def test_narwhal_run_by_hand_takes_the_activated_socket
    port = free_port
    log_path = File.join(@dir, "activate.log")
    pid = activate("127.0.0.1:#{port}", RbConfig.ruby, "-I", File.join(ROOT, "lib"), Narwhal::ServerProcess::EXE,
                   "-N", "config.ru", out: log_path)
    # the first connection starts narwhal; it waits in the socket's backlog
    assert_match(%r{\AHTTP/1.1 200 OK.*pid \d+\z}m, request(TCPSocket.new("127.0.0.1", port)))
    assert_match(/inherited addr=127\.0\.0\.1:#{port} fd=3$/, File.read(log_path))
    refute_match(/listening on/, File.read(log_path))
    assert_equal "narwhal master", File.read("/proc/#{pid}/cmdline").tr("\0", " ").strip, "exec'd in place: LISTEN_PID is its pid"
    Process.kill(:QUIT, pid)
    wait_until(timeout: 15, message: "narwhal exit") { Process.wait(pid, Process::WNOHANG) }
    @pids.delete(pid)
  end

  # --- Type=forking: what systemd sees ---

  def alive?(pid)
    !File.read("/proc/#{pid}/stat").split(") ", 2).last.start_with?("Z")
  rescue Errno::ENOENT
    false
  end

  # Runs the unit's ExecStart= (which daemonizes, -D) as systemd would:
  # the unit is started when the command exits 0; returns the main pid,
  # read from PIDFile=.
  def start_service(*prefix)
    out = File.join(@dir, "exec_start.log")
    launcher = Process.spawn(*prefix, *exec_start, chdir: @app, out: out, err: out, pgroup: true)
    @pids << launcher
    yield if block_given?
    _, status = Process.wait2(launcher)
    @pids.delete(launcher)
    assert status.success?, "ExecStart= failed: #{File.read(out)}\n#{log}"
    read_pid(pid_file).tap { |pid| assert pid && alive?(pid), "PIDFile= names no live process" }
  end

  def unix_request
    request(UNIXSocket.new(@sock))
  end

  # `systemctl kill --kill-whom=main -s USR2`; the new master's before_fork
  # sends QUIT to the old one. When systemd's main process exits, systemd
  # reads PIDFile= again: it must name the new, live master by then.
  def deploy(main)
    Process.kill(:USR2, main)
    wait_until(timeout: 30, message: "old master pid=#{main} gone\n#{log}") { !alive?(main) }
    new_main = read_pid(pid_file)
    refute_equal main, new_main
    assert alive?(new_main), "PIDFile= names a dead process after USR2\n#{log}"
    wait_until(message: ".oldbin removed") { !File.exist?("#{pid_file}.oldbin") }
    assert File.socket?(@sock), "the old master removed the socket the new one serves"
    new_main
  end

  def test_usr2_under_type_forking_leaves_pid_file_naming_the_live_master
    main = start_service
    assert_match(/\AHTTP\/1.1 200 OK/, unix_request)
    second = deploy(main)
    assert_match(/\AHTTP\/1.1 200 OK/, unix_request)
    refute_match(/carries on/, log)
    # and the next deploy works as the first did
    third = deploy(second)
    assert_match(/\AHTTP\/1.1 200 OK/, unix_request)
    # systemctl stop: KillSignal=SIGQUIT to the main process
    Process.kill(:QUIT, third)
    wait_until(timeout: 30, message: "stopped") { !alive?(third) }
    refute File.exist?(pid_file)
  end

  # narwhal.socket + narwhal.service: the unit's ExecStart= (-D) under
  # systemd-socket-activate, on the socket unit's ListenStream=.
  def test_the_service_takes_the_socket_of_the_socket_unit
    listen = unit_values(@socket, "ListenStream").first
    assert_equal @sock, listen
    client = nil
    main = start_service(ACTIVATE, "-l", listen) do
      wait_until(timeout: 10, message: "socket bound") { File.socket?(@sock) }
      client = UNIXSocket.new(@sock) # the first connection starts the service
    end
    assert_match(/\AHTTP\/1.1 200 OK/, request(client))
    assert_match(/inherited addr=#{Regexp.escape(@sock)} fd=3$/, log)
    refute_match(/listening on/, log)
    deploy(main)
    assert_match(/\AHTTP\/1.1 200 OK/, unix_request)
  end

  # systemd holds the socket (this test does, as systemd would) and passes
  # it as descriptor 3 to each start of the service.
  def start_with_systemd_socket(server)
    out = File.join(@dir, "service.log")
    pid = Process.spawn({ "LISTEN_FDS" => "1" }, "/bin/sh", "-c", 'LISTEN_PID=$$ exec "$0" "$@"',
                        RbConfig.ruby, "-I", File.join(ROOT, "lib"), Narwhal::ServerProcess::EXE, "-N", "config.ru",
                        3 => server, chdir: @app, out: out, err: out, pgroup: true)
    @pids << pid
    pid
  end

  def stop(pid)
    Process.kill(:QUIT, pid)
    wait_until(timeout: 15, message: "narwhal exit") { Process.wait(pid, Process::WNOHANG) }
    @pids.delete(pid)
  end

  # `systemctl restart narwhal.service` with narwhal.socket: the path must
  # still lead to systemd's socket, and a client that connects while no
  # narwhal runs is served by the next one.
  def test_a_socket_file_made_by_systemd_outlives_narwhal
    held = UNIXServer.new(@sock)
    first = start_with_systemd_socket(held)
    assert_match(/\AHTTP\/1.1 200 OK/, unix_request)
    stop(first)
    assert File.socket?(@sock), "narwhal deleted the socket file systemd created"
    waiting = UNIXSocket.new(@sock) # queued in the backlog systemd keeps
    start_with_systemd_socket(held)
    assert_match(/\AHTTP\/1.1 200 OK/, request(waiting))
    assert_match(/inherited addr=#{Regexp.escape(@sock)} fd=3$/, File.read(File.join(@dir, "service.log")))
  ensure
    held&.close
  end
end
