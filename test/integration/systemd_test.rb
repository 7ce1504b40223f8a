# frozen_string_literal: true

require "test_helper"
require "open3"
require "support/example_file"
require "support/notify_socket"

# examples/systemd: the committed units, with their paths pointed at a
# temporary app, pass `systemd-analyze verify` (and a broken copy does not);
# narwhal takes the socket `systemd-socket-activate` passes it, run by hand
# and as the unit's own ExecStart=; the unit's Type=notify sees READY=1 on
# NOTIFY_SOCKET (a socket of the test's own) and follows the master across
# USR2 by the MAINPID= it is sent; and a socket file systemd made outlives
# narwhal's exit.
class SystemdTest < Minitest::Test
  ROOT = Narwhal::ServerProcess::ROOT
  ACTIVATE = "/usr/bin/systemd-socket-activate"
  ANALYZE = "/usr/bin/systemd-analyze"
  APP = "run ->(env) { [200, { 'content-type' => 'text/plain' }, [\"pid \#{Process.pid}\"]] }\n"

  def setup
    @dir = Dir.mktmpdir("narwhal-systemd")
    @app = File.join(@dir, "app")
    @units = File.join(@dir, "units")
    [@app, "#{@app}/bin", "#{@app}/config", @units, "#{@dir}/run"].each { |d| FileUtils.mkdir_p(d) }
    @sock = File.join(@dir, "narwhal.sock")
    # the unit's paths, longest first where one is a prefix of another
    @paths = { "/run/narwhal.sock" => @sock, "/run/narwhal" => "#{@dir}/run", "/srv/app/current" => @app }
    File.write(File.join(@app, "config.ru"), APP)
    File.write(File.join(@app, "Gemfile"), "")
    # a binstub, as `bundle binstubs narwhal` makes: USR2 re-executes it
    binstub = File.join(@app, "bin", "narwhal")
    File.write(binstub, "#!#{RbConfig.ruby}\n$LOAD_PATH.unshift(#{File.join(ROOT, 'lib').inspect})\n" \
                        "load #{Narwhal::ServerProcess::EXE.inspect}\n")
    File.chmod(0o755, binstub)
    Narwhal::ExampleFile.write("systemd/narwhal.rb", File.join(@app, "config"), @paths)
    @service = Narwhal::ExampleFile.write("systemd/narwhal.service", @units,
                                          @paths.slice("/run/narwhal", "/srv/app/current"))
    @socket = Narwhal::ExampleFile.write("systemd/narwhal.socket", @units, @paths.slice("/run/narwhal.sock"))
    @pids = []
    @notify = Narwhal::NotifySocket.new(File.join(@dir, "notify.sock"))
  end

  def teardown
    masters = @service ? [pid_file, "#{pid_file}.oldbin"].filter_map { |f| read_pid(f) } : []
    (masters + @pids).each do |pid|
      Process.kill(:KILL, pid)
    rescue Errno::ESRCH
      nil
    end
    @pids.each { |pid| Process.wait(pid) rescue nil } # rubocop:disable Style/RescueModifier
    @notify&.close
    FileUtils.rm_rf(@dir)
  end

  # --- the unit files ---

  # Values of `key=` in a unit file, comments ignored.
  def unit_values(path, key)
    File.readlines(path, chomp: true).filter_map { |l| l.split("=", 2)[1] if l.start_with?("#{key}=") }
  end

  # The config's pid file: the before_fork hook finds the old master by it.
  def pid_file
    File.read(File.join(@app, "config", "narwhal.rb"))[/^pid "(.*)"$/, 1]
  end

  def exec_start
    unit_values(@service, "ExecStart").first.split
  end

  # What the journal would hold: the master's standard output and error.
  def log
    File.read(File.join(@dir, "exec_start.log"))
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
               "Type=notify" => "Tpye=notify" }
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
    assert_equal ["notify"], unit_values(@service, "Type")
    assert_equal ["all"], unit_values(@service, "NotifyAccess")
    refute_includes exec_start, "-D", "under Type=notify the master runs in the foreground"
    assert_empty unit_values(@service, "PIDFile")
    assert_equal "#{@dir}/run/narwhal.pid", pid_file
    assert_equal ["narwhal"], unit_values(@service, "RuntimeDirectory"), "the pid file's directory"
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
    assert_match(%r{inherited addr=127\.0\.0\.1:#{port} fd=3 url=http://127\.0\.0\.1:#{port}$}, File.read(log_path))
    refute_match(/listening on/, File.read(log_path))
    assert_equal "narwhal master", File.read("/proc/#{pid}/cmdline").tr("\0", " ").strip, "exec'd in place: LISTEN_PID is its pid"
    Process.kill(:QUIT, pid)
    wait_until(timeout: 15, message: "narwhal exit") { Process.wait(pid, Process::WNOHANG) }
    @pids.delete(pid)
  end

  # --- Type=notify: what systemd sees ---

  def alive?(pid)
    !File.read("/proc/#{pid}/stat").split(") ", 2).last.start_with?("Z")
  rescue Errno::ENOENT
    false
  end

  # Runs the unit's ExecStart= as systemd would for Type=notify, with
  # NOTIFY_SOCKET set: the unit is started when READY=1 comes; returns the
  # main pid it names (MAINPID=), the process systemd started.
  def start_service(*prefix)
    out = File.join(@dir, "exec_start.log")
    main = Process.spawn({ "NOTIFY_SOCKET" => @notify.path }, *prefix, *exec_start,
                         chdir: @app, out: out, err: out, pgroup: true)
    @pids << main
    yield if block_given?
    ready = @notify.next_message(timeout: 60).fields
    assert_equal "1", ready["READY"], "#{ready}\n#{log}"
    assert_equal main.to_s, ready["MAINPID"], "the main pid is the process systemd started"
    assert alive?(main)
    main
  end

  def unix_request
    request(UNIXSocket.new(@sock))
  end

  # `systemctl kill --kill-whom=main -s USR2`: the new master says it is
  # the main pid once it serves; its before_fork sends QUIT to the old one,
  # which hands the unit over (MAINPID=) instead of STOPPING=1. The two may
  # come in either order (one worker: the QUIT comes before it serves).
  def deploy(main)
    Process.kill(:USR2, main)
    seen = []
    ready = handed = nil
    until ready && handed
      message = @notify.next_message(timeout: 60)
      seen << message.text
      fields = message.fields
      refute fields.key?("STOPPING"), "STOPPING=1 during a deploy: #{seen}"
      ready = message if fields["READY"] == "1"
      handed = message if message.pid == main && fields.key?("MAINPID")
    end
    new_main = Integer(ready.fields["MAINPID"])
    assert_equal new_main, ready.pid, "READY=1 comes from the new master itself"
    refute_equal main, new_main
    assert_equal new_main.to_s, handed.fields["MAINPID"], "the old master hands over to another pid: #{seen}"
    @pids << new_main
    wait_until(timeout: 30, message: "old master pid=#{main} gone\n#{log}") { !alive?(main) }
    assert alive?(new_main), "the new main pid is dead after USR2\n#{log}"
    wait_until(message: ".oldbin removed") { !File.exist?("#{pid_file}.oldbin") }
    assert File.socket?(@sock), "the old master removed the socket the new one serves"
    assert_empty @notify.pending.select { |m| m.pid == main }, "the old master spoke after handing over"
    new_main
  end

  def test_usr2_under_type_notify_hands_the_unit_to_the_new_master
    main = start_service
    assert_match(/\AHTTP\/1.1 200 OK/, unix_request)
    assert_match(/systemd notify: NOTIFY_SOCKET=#{Regexp.escape(@notify.path)}$/, log)
    assert_match(/worker_processes :auto chose \d+: /, log)
    second = deploy(main)
    assert_match(/\AHTTP\/1.1 200 OK/, unix_request)
    refute_match(/carries on/, log)
    # and the next deploy works as the first did
    third = deploy(second)
    assert_match(/\AHTTP\/1.1 200 OK/, unix_request)
    # systemctl stop: KillSignal=SIGQUIT to the main process, which says so
    Process.kill(:QUIT, third)
    stopping = @notify.next_message
    assert_equal [third, "1"], [stopping.pid, stopping.fields["STOPPING"]]
    wait_until(timeout: 30, message: "stopped") { !alive?(third) }
    refute File.exist?(pid_file)
  end

  # narwhal.socket + narwhal.service: the unit's ExecStart= (-D) under
  # systemd-socket-activate, on the socket unit's ListenStream=.
  def test_the_service_takes_the_socket_of_the_socket_unit
    listen = unit_values(@socket, "ListenStream").first
    assert_equal @sock, listen
    client = nil
    # systemd-socket-activate passes on only the variables named with -E
    main = start_service(ACTIVATE, "-l", listen, "-E", "NOTIFY_SOCKET") do
      # the file exists from bind(2) on, connections are taken from listen(2) on
      client = wait_until(timeout: 10, message: "socket listening") do
        UNIXSocket.new(@sock) # the first connection starts the service
      rescue Errno::ENOENT, Errno::ECONNREFUSED
        nil
      end
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
