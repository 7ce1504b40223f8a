# frozen_string_literal: true

require "test_helper"
require "open3"
require "net/http"
require "etc"
require "json"
require "shellwords"

class CLITest < Minitest::Test
  HELLO = "run ->(_env) { [200, { 'content-type' => 'text/plain' }, ['hello']] }\n"

  def narwhal(*args, chdir:)
    cmd = [RbConfig.ruby, "-I", File.join(Narwhal::ServerProcess::ROOT, "lib"), Narwhal::ServerProcess::EXE, *args]
    Open3.capture3(*cmd, chdir: chdir)
  end

  def test_version_and_help
    Dir.mktmpdir do |dir|
      out, _, status = narwhal("-v", chdir: dir)
      assert status.success?
      assert_equal "narwhal #{Narwhal::VERSION}\n", out
      out, _, status = narwhal("-h", chdir: dir)
      assert status.success?
      assert_match(/--listen ADDR/, out)
      assert_match(/^\s+narwhal status \[--control ADDR \| -c FILE\] \[--json\]\s+\S/, out)
      docs = out[/^Docs: (\S+)/, 1]
      assert docs && File.exist?(File.join(docs, "CONFIGURATION.md")), "-h names the docs' directory:\n#{out}"
      help, err, status = narwhal("help", chdir: dir)
      assert status.success?, err
      assert_equal out, help, "narwhal help is -h"
    end
  end

  # README's flag list names every flag -h prints (by its short form when
  # it has one).
  def test_the_readme_lists_every_flag
    out, = Dir.mktmpdir { |dir| narwhal("-h", chdir: dir) }
    flags = out.lines.filter_map { |line| line[/\A\s+(-\w|--[\w-]+)[ ,]/, 1] }
    assert_operator flags.size, :>=, 14
    readme = File.read(File.join(Narwhal::ServerProcess::ROOT, "README.md"))
    assert_empty flags.reject { |flag| readme.match?(/`#{flag}\b/) }, "flags -h prints that README's list lacks"
  end

  def test_bad_config_exits_non_zero_with_file_and_line_and_binds_nothing
    Dir.mktmpdir do |dir|
      File.write(File.join(dir, "config.ru"), HELLO)
      conf = File.join(dir, "bad.rb")
      File.write(conf, "listen '127.0.0.1:0'\nkeepalive_timeout 'soon'\nworkers 4\n")
      _, err, status = narwhal("-c", conf, chdir: dir)
      refute status.success?
      assert_equal ["narwhal: #{conf}:2: keepalive_timeout expects a number >= 0, got \"soon\"\n",
                    "narwhal: #{conf}:3: workers is a Puma directive: use worker_processes 4\n"], err.lines
      refute_match(/listening on/i, err)
    end
  end

  # A Rails-style config reading its numbers from the environment, as in
  # production where the variables are set (Strings).
  def test_numbers_from_the_environment_configure_a_running_server
    Dir.mktmpdir do |dir|
      control = File.join(dir, "control.sock")
      config = <<~RUBY
        worker_processes ENV.fetch("WEB_CONCURRENCY", 1)
        threads ENV.fetch("RAILS_MAX_THREADS", 3)
        timeout ENV.fetch("TIMEOUT", 60)
        control_listen #{control.inspect}
      RUBY
      env = { "WEB_CONCURRENCY" => "2", "RAILS_MAX_THREADS" => "5", "TIMEOUT" => "2.5" }
      server = Narwhal::ServerProcess.start(app: HELLO, config: config, env: env, workers: 2)
      assert_match(/master pid=\d+ started \(narwhal \S+, 2 worker\(s\)\)/, server.log)
      status = JSON.parse(UNIXSocket.open(control) do |sock|
        sock.write("GET /status HTTP/1.1\r\nhost: x\r\n\r\n")
        sock.read.split("\r\n\r\n", 2).last
      end)
      assert_equal [2, 5], status.values_at("worker_processes", "threads")
      assert_equal "hello", Net::HTTP.get("127.0.0.1", "/", server.port)
    ensure
      server&.stop
    end
  end

  def test_unknown_flag_and_missing_rackup_file
    Dir.mktmpdir do |dir|
      _, err, status = narwhal("--frobnicate", chdir: dir)
      refute status.success?
      assert_match(/invalid option: --frobnicate/, err)
      _, err, status = narwhal("-l", "127.0.0.1:0", "missing.ru", chdir: dir)
      refute status.success?
      assert_match(/missing.ru not found/, err)
    end
  end

  def test_listen_errors_read_as_sentences_without_ruby_class_names
    Dir.mktmpdir do |dir|
      File.write(File.join(dir, "config.ru"), HELLO)
      _, err, status = narwhal("-l", "nope:", chdir: dir)
      refute status.success?
      assert_equal "narwhal: invalid listen address \"nope:\" (use host:port, :port, port, [::1]:port, " \
                   "/path/to.sock, ./path/to.sock or unix:/path)\n", err
      sock = File.join(dir, "tmp/sockets/narwhal.sock")
      _, err, status = narwhal("-l", sock, chdir: dir)
      refute status.success?
      assert_equal "narwhal: cannot listen on #{sock}: directory #{dir}/tmp/sockets does not exist\n", err
      holder = TCPServer.new("127.0.0.1", 0)
      port = holder.addr[1]
      conf = File.join(dir, "once.rb")
      File.write(conf, "listen '127.0.0.1:#{port}', tries: 0\n")
      _, err, status = narwhal("-c", conf, chdir: dir)
      refute status.success?
      assert_match(/\Anarwhal: cannot listen on 127\.0\.0\.1:#{port}: address already in use by pid #{Process.pid} \(/,
                   err)
    ensure
      holder&.close
    end
  end

  def test_a_pid_file_in_a_missing_directory_names_the_directory
    Dir.mktmpdir do |dir|
      File.write(File.join(dir, "config.ru"), HELLO)
      conf = File.join(dir, "pid.rb")
      File.write(conf, "listen '127.0.0.1:0'\npid '#{dir}/tmp/pids/narwhal.pid'\n")
      _, err, status = narwhal("-c", conf, chdir: dir)
      refute status.success?
      assert_includes err.lines, "narwhal: cannot write pid file #{dir}/tmp/pids/narwhal.pid: directory " \
                                 "#{dir}/tmp/pids does not exist\n"
    end
  end

  # The suite runs as root here, which may bind any port: the child drops
  # to nobody before it execs narwhal, and reports the uid it runs as.
  def narwhal_as_nobody(*args, chdir:)
    nobody = Etc.getpwnam("nobody")
    uid_r, uid_w = IO.pipe
    err_r, err_w = IO.pipe
    pid = fork do
      Process.initgroups("nobody", nobody.gid)
      Process::GID.change_privilege(nobody.gid)
      Process::UID.change_privilege(nobody.uid)
      uid_w.puts(Process.euid)
      uid_w.close
      # without bundler/setup: nobody may not read where the bundle lives,
      # and narwhal needs no gem before it binds
      exec({ "HOME" => chdir, "RUBYOPT" => nil }, RbConfig.ruby, "-I", File.join(Narwhal::ServerProcess::ROOT, "lib"),
           Narwhal::ServerProcess::EXE, *args, chdir: chdir, err: err_w, out: err_w)
    rescue Exception => e # rubocop:disable Lint/RescueException
      err_w.puts("could not start as nobody: #{e.message}")
      exit!(127) # never the test runner's at_exit hooks
    end
    [uid_w, err_w].each(&:close)
    Timeout.timeout(30) do
      uid = Integer(uid_r.read)
      err = err_r.read # until the child exits
      status = Process.wait2(pid).last
      pid = nil
      [uid, err, status]
    end
  ensure
    [uid_r, err_r].each { |io| io&.close }
    if pid
      Process.kill(:KILL, pid)
      Process.wait(pid)
    end
  end

  def test_a_privileged_port_without_privilege_says_so
    skip "needs root to drop to nobody (reported as a skip, not a pass)" unless Process.uid.zero?
    first_free = Integer(File.read("/proc/sys/net/ipv4/ip_unprivileged_port_start"), 10)
    skip "this machine lets any user bind port 80 (reported as a skip, not a pass)" if first_free <= 80
    Dir.mktmpdir do |dir|
      File.chmod(0o755, dir)
      File.write(File.join(dir, "config.ru"), HELLO)
      uid, err, status = narwhal_as_nobody("-l", "0.0.0.0:80", chdir: dir)
      refute_equal 0, uid, "the child must run unprivileged"
      refute status.success?
      assert_includes err.lines, "narwhal: cannot listen on 0.0.0.0:80: ports below #{first_free} need root or " \
                                 "CAP_NET_BIND_SERVICE\n"
    end
  end

  def test_serves_on_unix_socket
    Dir.mktmpdir do |dir|
      path = File.join(dir, "n.sock")
      server = Narwhal::ServerProcess.start(app: HELLO, listen: path)
      sock = UNIXSocket.new(path)
      sock.write("GET / HTTP/1.0\r\n\r\n")
      response = sock.read
      assert_match(%r{\AHTTP/1.1 200 OK\r\n}, response)
      assert response.end_with?("\r\n\r\nhello")
      assert_match(/listening on addr=#{Regexp.escape(path)} fd=\d+\n/, server.log)
    ensure
      sock&.close
      server&.stop
    end
  end

  def test_quit_finishes_and_exits_zero_and_int_exits
    server = Narwhal::ServerProcess.start(app: HELLO)
    assert_equal "hello", Net::HTTP.get(server.host, "/", server.port)
    server.signal(:QUIT)
    assert server.wait_exit.success?
    assert_match(/QUIT received/, server.log)

    server = Narwhal::ServerProcess.start(app: HELLO)
    server.signal(:INT)
    server.wait_exit
    assert_match(/INT received: stopping now/, server.log)
  ensure
    server&.stop
  end

  def test_quit_lets_a_request_in_progress_finish
    server = Narwhal::ServerProcess.start(app: <<~'RU')
      run ->(env) { [200, { 'content-type' => 'text/plain' }, ["got #{env['rack.input'].read}"]] }
    RU
    fds = -> { server.connection_fds }
    baseline = fds.call
    c = server.connect
    c.write("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nab")
    wait_until(message: "connection accepted") { fds.call > baseline }
    server.signal(:QUIT)
    wait_until(message: "QUIT reached the worker") { server.log.include?("finishing requests in progress") }
    c.write("cd")
    r = c.read_response
    assert_equal "got abcd", r.body
    assert_equal "close", r["connection"]
    assert server.wait_exit.success?
  ensure
    c&.close
    server&.stop
  end

  # Started without -N (ServerProcess adds it, so spawn by hand here).
  def start_plain(env_flag, dir)
    File.write(File.join(dir, "config.ru"), "run ->(env) { [200, { 'content-type' => 'text/plain' }, [ENV['RACK_ENV']]] }\n")
    log = File.join(dir, "log")
    port = TCPServer.new("127.0.0.1", 0).then { |s| s.addr[1].tap { s.close } }
    pid = Process.spawn(RbConfig.ruby, "-I", File.join(Narwhal::ServerProcess::ROOT, "lib"),
                        Narwhal::ServerProcess::EXE, *env_flag, "-p", port.to_s, chdir: dir, out: log, err: log)
    wait_until(message: "ready") { File.read(log).include?("ready") }
    [pid, port, log]
  end

  def test_development_gets_rackup_default_middleware_and_e_sets_rack_env
    Dir.mktmpdir do |dir|
      pid, port, log = start_plain([], dir)
      assert_equal "development", Net::HTTP.get("127.0.0.1", "/", port)
      # Rack::CommonLogger writes an access line; Rack::Lint is in place too
      wait_until(message: "access log line") { File.read(log).match?(%r{"GET / HTTP/1.1" 200}) }
      Process.kill(:TERM, pid)
      Process.wait(pid)
      pid, port, log = start_plain(%w[-E production], dir)
      assert_equal "production", Net::HTTP.get("127.0.0.1", "/", port)
      Process.kill(:TERM, pid)
      Process.wait(pid)
      refute_match(%r{"GET / HTTP/1.1" 200}, File.read(log), "no CommonLogger in production")
    ensure
      Process.kill(:TERM, pid) rescue nil # rubocop:disable Style/RescueModifier
    end
  end

  # One line per listener: Unicorn's fields for scripts, a URL for people.
  def test_the_log_gives_a_url_to_click_once_and_no_ctrl_c_hint_when_not_a_terminal
    sock = File.join(Dir.tmpdir, "narwhal-cli-#{Process.pid}.sock")
    server = Narwhal::ServerProcess.start(app: HELLO, config: "listen '127.0.0.1:0'\nlisten #{sock.inspect}\n",
                                          listen: nil)
    assert_match(%r{INFO -- : listening on addr=127\.0\.0\.1:#{server.port} fd=\d+ url=http://127\.0\.0\.1:#{server.port}$},
                 server.log)
    assert_match(/INFO -- : listening on addr=#{Regexp.escape(sock)} fd=\d+$/, server.log)
    assert_equal 2, server.log.scan(/listening on/i).size, "each listener once:\n#{server.log}"
    assert_equal "hello", Net::HTTP.get(URI(server.log[%r{http://\S+}]))
    refute_match(/Ctrl-C/, server.log, "not in the foreground of a terminal")
  ensure
    server&.stop
  end

  # Ctrl-C stops a server in the foreground of a terminal, wherever its log
  # goes.
  def test_in_a_terminal_ctrl_c_is_offered_with_the_log_in_a_file
    require "pty"
    Dir.mktmpdir do |dir|
      File.write(File.join(dir, "config.ru"), HELLO)
      log = File.join(dir, "log")
      cmd = "exec #{Shellwords.join([RbConfig.ruby, '-I', File.join(Narwhal::ServerProcess::ROOT, 'lib'),
                                     Narwhal::ServerProcess::EXE, '-N', '-l', '127.0.0.1:0',
                                     File.join(dir, 'config.ru')])} 2>#{Shellwords.escape(log)}"
      PTY.spawn("sh", "-c", cmd) do |_tty, keyboard, pid|
        wait_until(timeout: 30, message: "the ready line") { File.exist?(log) && File.read(log).include?("ready pid=") }
        assert_match(/INFO -- : Ctrl-C to stop$/, File.read(log))
        keyboard.write("\x03")
        _, status = Timeout.timeout(15) { Process.wait2(pid) }
        assert status.success?, File.read(log)
      ensure
        begin
          Process.kill(:KILL, pid)
        rescue Errno::ESRCH
          nil
        end
      end
    end
  end

  # On a terminal the log says how to stop, and Ctrl-C does stop it.
  def test_on_a_terminal_ctrl_c_is_offered_and_stops_the_server
    require "pty"
    Dir.mktmpdir do |dir|
      File.write(File.join(dir, "config.ru"), HELLO)
      cmd = [RbConfig.ruby, "-I", File.join(Narwhal::ServerProcess::ROOT, "lib"), Narwhal::ServerProcess::EXE,
             "-N", "-l", "127.0.0.1:0", File.join(dir, "config.ru")]
      PTY.spawn(*cmd) do |tty, keyboard, pid|
        seen = read_until(tty, /url=http:\S+\s+.*Ctrl-C to stop.*ready pid=/m)
        assert_match(%r{url=http://127\.0\.0\.1:\d+\r?\n.*INFO -- : Ctrl-C to stop\r?\n}, seen)
        keyboard.write("\x03") # the terminal sends SIGINT to the foreground group
        read_until(tty, /INT received: stopping now/)
        _, status = Timeout.timeout(15) { Process.wait2(pid) }
        assert status.success?
      ensure
        begin
          Process.kill(:KILL, pid)
        rescue Errno::ESRCH
          nil
        end
      end
    end
  end

  def read_until(tty, pattern, timeout: 15)
    seen = +""
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    until seen.match?(pattern)
      left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
      flunk "timed out waiting for #{pattern.inspect} in:\n#{seen}" if left <= 0
      seen << tty.read_nonblock(4096) if IO.select([tty], nil, nil, left)
    end
    seen
  rescue Errno::EIO # the other side closed
    seen
  end

  # The server `rackup -s narwhal` runs (no master) says the same.
  def test_the_standalone_server_gives_a_url_too
    script = "require 'narwhal'; c = Narwhal::Configurator.new; c.add_listener('127.0.0.1:0'); " \
             "Narwhal::Server.standalone(->(_env) { [200, {}, ['standalone']] }, c).run"
    Dir.mktmpdir do |dir|
      log = File.join(dir, "log")
      pid = Process.spawn(RbConfig.ruby, "-I", File.join(Narwhal::ServerProcess::ROOT, "lib"), "-e", script,
                          out: log, err: log, pgroup: true)
      url = wait_until(message: "the URL line") { File.read(log)[%r{ url=(http://127\.0\.0\.1:\d+)$}, 1] }
      assert_equal "standalone", Net::HTTP.get(URI(url))
      refute_match(/Ctrl-C/, File.read(log))
    ensure
      Process.kill(:TERM, pid) if pid
      Process.wait(pid) if pid
    end
  end

  # -D returns once a worker serves (not before), and says how to find the
  # log and how to stop the daemon.
  def test_daemonize_returns_once_a_worker_is_ready_and_says_how_to_stop_it
    Dir.mktmpdir do |dir|
      pid_path = File.join(dir, "narwhal.pid")
      File.write(File.join(dir, "config.ru"), <<~RU)
        deadline = Time.now + 60
        sleep 0.02 until File.exist?(File.join(__dir__, "go")) || Time.now > deadline
        #{HELLO}
      RU
      File.write(File.join(dir, "n.rb"), "pid #{pid_path.inspect}\n")
      port = TCPServer.new("127.0.0.1", 0).then { |s| s.addr[1].tap { s.close } }
      out = File.join(dir, "launcher.out")
      launcher = Process.spawn(RbConfig.ruby, "-I", File.join(Narwhal::ServerProcess::ROOT, "lib"),
                               Narwhal::ServerProcess::EXE, "-D", "-N", "-p", port.to_s, "-c", "n.rb", "config.ru",
                               chdir: dir, out: out, err: out)
      master = wait_until(message: "the daemon's pid file") { read_pid(pid_path) }
      wait_until(message: "a worker loading the app") { Narwhal::ServerProcess.children_of(master).any? }
      # the worker is held in its app's load: for a second the launcher must keep waiting
      until_time = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 1
      while Process.clock_gettime(Process::CLOCK_MONOTONIC) < until_time
        assert_nil Process.wait2(launcher, Process::WNOHANG), "the launcher returned before a worker was ready"
        sleep 0.05
      end
      File.write(File.join(dir, "go"), "")
      _, status = Timeout.timeout(30) { Process.wait2(launcher) }
      launcher = nil
      assert status.success?, File.read(out)
      assert_equal "hello", Net::HTTP.get("127.0.0.1", "/", port), "ready means serving"
      assert_equal <<~OUT, File.read(out)
        narwhal: master pid=#{master} is running in the background
        narwhal: its log (stderr) is discarded (/dev/null): set stderr_path in the config file (-c) to keep it
        narwhal: stop it with: kill -QUIT $(cat #{pid_path})
      OUT
      Process.kill(:QUIT, master)
      wait_until(message: "the daemon gone") { !File.exist?("/proc/#{master}") }
    ensure
      Process.kill(:KILL, launcher) if launcher rescue nil # rubocop:disable Style/RescueModifier
      Process.kill(:KILL, master) if master && File.exist?("/proc/#{master}") rescue nil # rubocop:disable Style/RescueModifier
    end
  end
end
