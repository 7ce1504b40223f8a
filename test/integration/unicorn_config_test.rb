# frozen_string_literal: true

require "test_helper"
require "etc"

# examples/unicorn.conf.rb, a production Unicorn config, runs unchanged:
# daemonized, with a pid file, log files, per-worker ports, user switching
# (when run as root) and the before_fork hook that retires the old master
# after a USR2.
class UnicornConfigTest < Minitest::Test
  EXAMPLE = File.join(Narwhal::ServerProcess::ROOT, "examples", "unicorn.conf.rb")
  APP = "run ->(env) { [200, { 'content-type' => 'text/plain' }, [\"worker \#{Process.pid}\"]] }\n"

  def setup
    @root = Dir.mktmpdir("narwhal-app")
    File.chmod(0o755, @root)
    %w[tmp/sockets tmp/pids log].each { |d| FileUtils.mkdir_p(File.join(@root, d)) }
    File.write(File.join(@root, "config.ru"), APP)
    @ports = free_ports(1) + consecutive_free_ports
    @env = { "APP_ROOT" => @root, "WEB_CONCURRENCY" => "2", "HEALTH_PORT" => @ports[0].to_s,
             "WORKER_BASE_PORT" => @ports[1].to_s, "RUBYLIB" => File.join(Narwhal::ServerProcess::ROOT, "lib") }
    if Process.uid.zero?
      @env["APP_USER"] = "nobody"
      @env["APP_GROUP"] = Etc.getgrgid(Etc.getpwnam("nobody").gid).name
      FileUtils.chown_R("nobody", nil, File.join(@root, "log"))
    end
    @pid_file = File.join(@root, "tmp/pids/unicorn.pid")
  end

  def teardown
    [@pid_file, "#{@pid_file}.oldbin"].each do |f|
      pid = File.read(f).to_i if File.exist?(f)
      Process.kill(:KILL, pid) if pid&.positive?
    rescue Errno::ESRCH
      nil
    end
    @pids&.each { |pid| Process.kill(:KILL, pid) rescue nil } # rubocop:disable Style/RescueModifier
    FileUtils.rm_rf(@root)
  end

  def free_ports(count)
    servers = Array.new(count) { TCPServer.new("127.0.0.1", 0) }
    servers.map { |s| s.addr[1] }.tap { servers.each(&:close) }
  end

  # WORKER_BASE_PORT + worker.nr: two neighbouring free ports
  def consecutive_free_ports
    loop do
      base = free_ports(1).first
      pair = [base, base + 1]
      begin
        pair.map { |port| TCPServer.new("127.0.0.1", port) }.each(&:close)
        return pair
      rescue Errno::EADDRINUSE
        next
      end
    end
  end

  def narwhal(*args)
    Open3.capture3(@env, RbConfig.ruby, Narwhal::ServerProcess::EXE, *args, chdir: @root)
  end

  def get(port)
    sock = TCPSocket.new("127.0.0.1", port)
    sock.write("GET / HTTP/1.0\r\n\r\n")
    sock.read
  ensure
    sock&.close
  end

  def workers_of(master)
    Narwhal::ServerProcess.children_of(master)
  end

  def master_pid
    read_pid(@pid_file)
  end

  def test_the_unicorn_config_runs_unchanged
    require "open3"
    _, err, status = narwhal("-D", "-E", "production", "-c", EXAMPLE)
    assert status.success?, "narwhal -D failed: #{err}"
    master = master_pid
    assert master.positive?
    wait_until(message: "two workers") { workers_of(master).size == 2 }
    wait_until(message: "per-worker ports\n#{File.read(File.join(@root, "log/unicorn.stderr.log")) rescue nil}") do
      [@ports[1], @ports[2]].all? { |port| get(port).start_with?("HTTP/1.1 200") rescue false } # rubocop:disable Style/RescueModifier
    end
    assert_match(/\AHTTP\/1.1 200 OK/, get(@ports[0]))
    sock = UNIXSocket.new(File.join(@root, "tmp/sockets/unicorn.sock"))
    sock.write("GET / HTTP/1.0\r\n\r\n")
    assert_match(/\AHTTP\/1.1 200 OK/, sock.read)
    sock.close
    log = File.read(File.join(@root, "log/unicorn.stderr.log"))
    assert_match(/worker=1 ready/, log)
    if Process.uid.zero?
      workers_of(master).each do |pid|
        assert_equal Etc.getpwnam("nobody").uid, File.stat("/proc/#{pid}").uid, "worker runs as nobody"
      end
    end

    # USR2: the new master's before_fork retires the old one by itself
    Process.kill(:USR2, master)
    wait_until(timeout: 20, message: "old master gone") do
      !File.exist?("/proc/#{master}") || File.read("/proc/#{master}/stat").include?(") Z ")
    end
    new_master = master_pid
    refute_equal master, new_master
    wait_until(timeout: 20, message: "new workers serving on the per-worker ports") do
      get(@ports[1]).start_with?("HTTP/1.1 200") rescue false # rubocop:disable Style/RescueModifier
    end
    assert_match(/\AHTTP\/1.1 200 OK/, get(@ports[0]))
    @pids = [new_master]
  end

  def test_daemonize_reports_a_failed_boot
    require "open3"
    blocker = TCPServer.new("127.0.0.1", @ports[0])
    conf = File.join(@root, "bad.conf.rb")
    File.write(conf, "listen #{@ports[0]}, tries: 0\npid #{@pid_file.inspect}\n")
    _, err, status = narwhal("-D", "-c", conf)
    refute status.success?
    assert_match(/\Anarwhal: cannot listen on 0\.0\.0\.0:#{@ports[0]}: address already in use by pid #{Process.pid} /,
                 err)
  ensure
    blocker&.close
  end

  def test_winch_stops_the_workers_of_a_daemonized_master_and_ttin_brings_one_back
    require "open3"
    conf = File.join(@root, "small.conf.rb")
    File.write(conf, "worker_processes 2\nlisten #{@ports[0]}\npid #{@pid_file.inspect}\n" \
                     "stderr_path #{File.join(@root, 'log/err.log').inspect}\n")
    _, err, status = narwhal("-D", "-c", conf)
    assert status.success?, err
    master = master_pid
    wait_until(message: "two workers") { workers_of(master).size == 2 }
    Process.kill(:WINCH, master)
    wait_until(message: "no workers") { workers_of(master).empty? }
    Process.kill(:TTIN, master)
    wait_until(message: "one worker") { workers_of(master).size == 1 }
    wait_until(message: "serving") { get(@ports[0]).start_with?("HTTP/1.1 200") rescue false } # rubocop:disable Style/RescueModifier
  end
end
