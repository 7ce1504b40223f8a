# frozen_string_literal: true

require "test_helper"
require "etc"
require "fileutils"
require "tmpdir"
require "net/http"

# The master under failures of its own steps: a hook that raises, a fork the
# kernel refuses, a worker killed for `timeout` that the master sees again
# before it is reaped. Each time the master logs it once, goes on, and its
# workers keep serving and its signals keep working.
class MasterFaultsTest < Minitest::Test
  APP = <<~'RU'
    run lambda { |env|
      case env["PATH_INFO"]
      when "/slow" then sleep 5; [200, { "content-type" => "text/plain" }, ["late"]]
      when "/pid" then [200, { "content-type" => "text/plain" }, [Process.pid.to_s]]
      else [200, { "content-type" => "text/plain" }, ["ok"]]
      end
    }
  RU

  def start(config, workers: 1, **kw)
    @servers ||= []
    server = Narwhal::ServerProcess.new(app: APP, config: "preload_app true\n#{config}", **kw)
    @servers << server
    server.wait_ready(workers: workers, timeout: 30)
  end

  def teardown
    @servers&.each(&:stop)
    FileUtils.rm_rf(@copy) if @copy
  end

  def wait_for_workers(server, count, timeout: 20)
    wait_until(timeout: timeout, message: "#{count} worker(s)") do
      pids = server.worker_pids
      pids if pids.size == count
    end
  end

  def assert_serves(server)
    assert_equal 200, server.get("/").status
  end

  # QUIT still works, and the master exits 0.
  def assert_quits(server)
    server.signal(:QUIT)
    assert server.wait_exit(timeout: 20).success?, server.log
  end

  def test_a_before_fork_that_raises_during_a_respawn_is_logged_and_retried_while_the_other_worker_serves
    server = start(<<~'RB', workers: 2)
      worker_processes 2
      $forks = 0
      before_fork do |server, worker|
        $forks += 1
        raise "database is down" if $forks == 3 # the first respawn
      end
    RB
    victim, survivor = wait_for_workers(server, 2)
    Process.kill(:KILL, victim)
    wait_until(timeout: 20, message: "the failed before_fork logged") { server.log.include?("before_fork failed") }
    assert_serves(server) # the other worker, while the place is empty
    wait_until(timeout: 20, message: "the place filled on a later pass") do
      (pids = server.worker_pids).size == 2 && !pids.include?(victim)
    end
    assert_includes server.worker_pids, survivor
    assert_match(/worker=\d before_fork failed: database is down; not forked, next attempt in 0\.5s\n/, server.log)
    assert_equal 1, server.log.scan("database is down").size, server.log
    assert_serves(server)
    assert_quits(server)
  end

  def test_an_after_worker_exit_that_raises_is_logged_and_the_worker_is_replaced
    server = start(<<~'RB', workers: 2)
      worker_processes 2
      after_worker_exit { |server, worker, status| raise ArgumentError, "paging failed for worker #{worker.nr}" }
    RB
    victim, survivor = wait_for_workers(server, 2)
    Process.kill(:KILL, victim)
    wait_until(timeout: 20, message: "a replacement") do
      (pids = server.worker_pids).size == 2 && !pids.include?(victim)
    end
    assert_includes server.worker_pids, survivor
    assert_match(/worker=\d pid=#{victim} after_worker_exit failed: paging failed for worker \d\n/, server.log)
    assert_equal 1, server.log.scan("after_worker_exit failed").size
    assert_serves(server)
    assert_quits(server)
  end

  # A kernel that refuses a new process (RLIMIT_NPROC here; a full pids
  # cgroup gives the same EAGAIN): the fork fails, is logged and tried
  # again later, while reaping and signals go on. RLIMIT_NPROC binds only
  # an unprivileged user and counts all of that user's tasks, so the master
  # runs as a user id no account and no other process has, with room for
  # three tasks: the master, its fork watchdog thread and one worker.
  def test_a_fork_the_kernel_refuses_is_logged_and_the_master_still_takes_signals
    assert Process.uid.zero?, "runs as root (as bin/test does), to start the master as another user"
    uid = spare_uid
    as_user = ["setpriv", "--reuid=#{uid}", "--regid=#{uid}", "--clear-groups"]
    root, gemfile = tree_for(as_user)
    wrapper = [*as_user, "prlimit", "--nproc=3:3"]
    server = start("worker_processes 1\n", wrapper: wrapper, dir_mode: 0o755, root: root,
                                           env: { "BUNDLE_GEMFILE" => gemfile })
    worker = wait_for_workers(server, 1).first
    2.times do |more| # the second worker is one too many, whatever the watchdog thread costs
      server.signal(:TTIN)
      wait_until(timeout: 20, message: "TTIN taken") { server.log.include?("worker_processes now #{2 + more}") }
    end
    wait_until(timeout: 20, message: "the refused fork logged") { server.log.include?("fork failed") }
    refused = "worker=1 fork failed: the kernel refused a new process (resource temporarily unavailable); " \
              "RLIMIT_NPROC 3 for uid #{uid}; not forked, next attempt in 0.5s\n"
    assert_includes server.log, refused
    assert_serves(server)
    assert_equal [worker], server.worker_pids
    assert_quits(server)
    assert_match(/master pid=\d+ exiting/, server.log)
  end

  # A user id without an account whose processes RLIMIT_NPROC would count.
  def spare_uid
    taken = Dir.glob("/proc/[0-9]*/status").filter_map do |f|
      File.read(f)[/^Uid:\s+(\d+)/, 1]&.to_i
    rescue SystemCallError
      nil
    end
    (61_000..65_000).find do |uid|
      Etc.getpwuid(uid)
      false
    rescue ArgumentError
      !taken.include?(uid)
    end
  end

  # The checkout when that user can read it, else a copy of what the server
  # loads (a checkout under a private directory such as /root); with the
  # bundle's Gemfile in that tree.
  def tree_for(as_user)
    root = Narwhal::ServerProcess::ROOT
    gemfile = File.expand_path(ENV.fetch("BUNDLE_GEMFILE", File.join(root, "Gemfile")))
    return [root, gemfile] if system(*as_user, "test", "-r", gemfile, "-a", "-r", File.join(root, "lib", "narwhal.rb"),
                                     out: File::NULL, err: File::NULL)

    @copy = Dir.mktmpdir("narwhal-tree")
    FileUtils.cp_r(%w[lib exe gemfiles Gemfile Gemfile.lock narwhal.gemspec].map { |f| File.join(root, f) }, @copy)
    FileUtils.chmod_R("a+rX", @copy)
    File.chmod(0o755, @copy)
    [@copy, File.join(@copy, gemfile.delete_prefix("#{root}/"))]
  end

  # Two stuck workers at once: the master passes over each again before
  # it is reaped. Each kill is logged, hooked and counted once.
  def test_a_worker_killed_for_timeout_is_logged_hooked_and_counted_once
    server = start(<<~'RB', workers: 2)
      worker_processes 2
      timeout 1
      control_listen "127.0.0.1:0"
      after_worker_timeout { |server, worker, info| server.logger.info("hook: timeout pid=#{worker.pid}") }
    RB
    rounds = 3
    rounds.times do |round|
      pids = wait_for_workers(server, 2)
      wait_until(timeout: 20, message: "both workers ready") do
        (pids - server.log.scan(/ready pid=(\d+)/).flatten.map(&:to_i)).empty?
      end
      clients = Array.new(2) { server.connect.tap { |c| c.write("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n") } }
      clients.each { |c| assert_equal 504, c.read_response(timeout: 20).status, "round #{round}: the stuck request" }
      clients.each { |c| assert c.closed?(timeout: 20), "round #{round}: then closed" }
      clients.each(&:close)
      wait_until(timeout: 20, message: "round #{round} killed") { (server.worker_pids & pids).empty? }
    end
    kills = server.log.scan(/worker=\d+ pid=(\d+) timeout \(/).flatten
    assert_equal 2 * rounds, kills.size, server.log
    assert_equal kills.uniq, kills, "one kill line per worker"
    wait_until(timeout: 10, message: "every hook ran") { server.log.scan(/hook: timeout pid=/).size >= kills.size }
    assert_equal kills.sort, server.log.scan(/hook: timeout pid=(\d+)/).flatten.sort
    control = server.log[/control listener on (\S+)/, 1]
    metrics = Net::HTTP.get(URI("http://#{control}/metrics"))
    assert_match(/^narwhal_timeout_kills_total #{kills.size}$/, metrics)
  end
end
