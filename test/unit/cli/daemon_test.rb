# frozen_string_literal: true

require "test_helper"

# -D in real processes: the launcher forks a detached master and exits
# once it reports, 0 with where it runs and how to stop it, 1 with why it
# failed. Each run happens in a forked child (the launcher), so this
# process is never detached.
class CLIDaemonTest < Minitest::Test
  Daemon = Narwhal::CLI::Daemon

  def setup
    @dir = Dir.mktmpdir("narwhal-daemon")
    @info = File.join(@dir, "daemon")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  # Runs the block in the daemon a forked launcher makes (env set in the
  # launcher; :launcher is its pid); returns the launcher's exit status,
  # everything it printed and its pid.
  def launch(env = {}, &daemon_body)
    out_r, out_w = IO.pipe
    launcher = fork do
      out_r.close
      $stdout.reopen(out_w)
      $stderr.reopen(out_w)
      out_w.close
      env.each { |k, v| ENV[k] = v == :launcher ? Process.pid.to_s : v.to_s }
      ENV.delete(Narwhal::Listener::Set::FD_ENV) unless env.key?(Narwhal::Listener::Set::FD_ENV)
      daemon_body.call(Daemon.daemonize)
      exit!(0)
    end
    out_w.close
    output = out_r.read # until the daemon too lets go of the pipe
    Process.wait(launcher)
    [$?.exitstatus, output, launcher]
  ensure
    out_r&.close
  end

  # What the daemon noted about itself, once it has (atomically written).
  def info
    wait_until(message: "the daemon's note") { File.exist?(@info) && File.read(@info).split }
  end

  def note(*fields)
    File.write("#{@info}.tmp", fields.join(" "))
    File.rename("#{@info}.tmp", @info)
  end

  def test_the_launcher_returns_once_the_master_is_ready_and_says_how_to_stop_it
    status, output, launcher = launch("LISTEN_PID" => "launcher") do |daemon|
      note(Process.pid, Process.getsid, ENV.fetch("LISTEN_PID"), File.readlink("/proc/self/fd/0"),
           File.readlink("/proc/self/fd/1"))
      daemon.ready(pid_file: "/run/narwhal.pid")
    end
    pid, sid, listen_pid, stdin, stdout = info
    assert_equal 0, status
    assert_equal "narwhal: master pid=#{pid} is running in the background\n" \
                 "narwhal: its log (stderr) is discarded (/dev/null): set stderr_path in the config file (-c) " \
                 "to keep it\nnarwhal: stop it with: kill -QUIT $(cat /run/narwhal.pid)\n", output
    refute_equal launcher, Integer(pid)
    refute_equal Process.getsid, Integer(sid), "a session of its own: no terminal can reach it"
    assert_equal ["/dev/null", "/dev/null"], [stdin, stdout]
    assert_equal "launcher", listen_pid, "a LISTEN_PID naming someone else is left alone"
  end

  # systemd's LISTEN_PID names the process it started: the launcher's
  # sockets are the master's now.
  def test_listen_pid_follows_the_master
    status, = launch("LISTEN_PID" => :launcher) do |daemon|
      note(Process.pid, ENV.fetch("LISTEN_PID"))
      daemon.ready
    end
    assert_equal 0, status
    pid, listen_pid = info
    assert_equal pid, listen_pid
  end

  def test_a_failed_boot_exits_1_with_the_reason_on_one_line
    status, output, = launch { |daemon| daemon.failed("the app failed to load:\nconfig.ru:1:\tboom") }
    assert_equal [1, "narwhal: the app failed to load: config.ru:1: boom\n"], [status, output]
  end

  def test_a_master_that_dies_before_reporting_exits_1
    status, output, = launch { |_daemon| exit!(3) }
    assert_equal [1, "narwhal: the master exited before it was ready\n"], [status, output]
  end

  # USR2's new master is detached already: it does not fork again (the old
  # master watches its pid), only lets go of the terminal.
  def test_a_reexecuted_master_stays_the_same_process
    status, output, launcher = launch(Narwhal::Listener::Set::FD_ENV => "5") do |daemon|
      note(Process.pid, File.readlink("/proc/self/fd/1"))
      daemon.ready # nobody waits: nothing to report to
    end
    assert_equal [0, ""], [status, output]
    assert_equal [launcher.to_s, "/dev/null"], info
  end

  def test_the_notice_with_a_log_file_and_without_a_pid_file
    assert_equal ["master pid=42 is running in the background", "its log (stderr) goes to /var/log/narwhal.log",
                  "stop it with: kill -QUIT 42"],
                 Daemon.notice(pid: 42, pid_file: nil, stderr_path: "/var/log/narwhal.log")
  end
end
