# frozen_string_literal: true

require "test_helper"
require "net/http"

# The master/worker process model: workers replaced when they die or hang,
# Unicorn's signals, and what happens when the master itself dies.
class MasterTest < Minitest::Test
  APP = <<~'RU'
    run lambda { |env|
      case env["PATH_INFO"]
      when "/hang" then sleep 30; [200, { "content-type" => "text/plain" }, ["late"]]
      when "/pid" then [200, { "content-type" => "text/plain" }, [Process.pid.to_s]]
      else [200, { "content-type" => "text/plain" }, ["ok"]]
      end
    }
  RU

  def start(config = "", workers: 1, **kw)
    @servers ||= []
    server = Narwhal::ServerProcess.start(app: APP, config: "preload_app true\n#{config}", workers: workers, **kw)
    @servers << server
    server
  end

  def teardown
    @servers&.each(&:stop)
  end

  def get(server, path = "/")
    Net::HTTP.start(server.host, server.port, open_timeout: 5, read_timeout: 10) { |h| h.get(path) }
  end

  def wait_for_workers(server, count, timeout: 10)
    wait_until(timeout: timeout, message: "#{count} worker(s)") do
      pids = server.worker_pids
      pids if pids.size == count
    end
  end

  def test_master_forks_workers_that_serve_and_never_serves_itself
    server = start("worker_processes 3\n", workers: 3)
    pids = wait_for_workers(server, 3)
    served = Array.new(30) { get(server, "/pid").body.to_i }.uniq
    assert served.all? { |pid| pids.include?(pid) }, "served by #{served}, workers #{pids}"
    refute_includes served, server.pid
    assert_match(/narwhal master/, File.read("/proc/#{server.pid}/cmdline"))
    assert_equal(%w[narwhal\ worker[0] narwhal\ worker[1] narwhal\ worker[2]],
                 pids.map { |pid| File.read("/proc/#{pid}/cmdline").delete("\0") }.sort)
  end

  def test_a_killed_worker_is_reaped_logged_and_replaced
    server = start
    old = wait_for_workers(server, 1).first
    Process.kill(:KILL, old)
    wait_until(message: "a replacement ready") { server.log.scan(/worker=0 ready pid=(\d+)/).flatten.last.to_i != old }
    assert_match(/reaped #<Process::Status: pid #{old} SIGKILL \(signal 9\)> worker=0/, server.log)
    assert_equal "ok", get(server).body
  end

  def test_a_worker_past_timeout_is_killed_its_client_answered_504_and_a_new_worker_serves
    hook = <<~'RB'
      after_worker_timeout do |server, worker, info|
        server.logger.info("hook: worker=#{worker.nr} pid=#{worker.pid} #{info.request_method} #{info.path} " \
                           "elapsed>1=#{info.elapsed > 1} timeout=#{info.timeout} others=#{info.other_requests} " \
                           "answered=#{info.answered}")
      end
    RB
    server = start("timeout 1\n#{hook}")
    old = wait_for_workers(server, 1).first
    c = server.connect
    c.write("GET /hang?q=1 HTTP/1.1\r\nHost: x\r\n\r\n")
    assert_equal 504, c.read_response(timeout: 10).status, "the hung request is answered before the kill"
    assert c.closed?(timeout: 10), "then its connection is closed"
    # the answer goes out before the kill, and the kill's line after it
    wait_until(message: "the kill's line") { server.log.include?("killing") }
    assert_match(%r{worker=0 pid=#{old} timeout \(\d+\.\d+s > 1s\) on GET /hang, killing; no other request in flight},
                 server.log)
    wait_until(message: "the hook's line") { server.log.include?("hook: ") }
    assert_includes server.log, "hook: worker=0 pid=#{old} GET /hang elapsed>1=true timeout=1 others=0 answered=1"
    assert_equal "ok", get(server).body
    refute_equal old, wait_for_workers(server, 1).first
  end

  def test_idle_workers_are_not_timed_out
    server = start("timeout 1\n")
    pids = wait_for_workers(server, 1)
    # several timeout checks (every 0.5 s) pass while the worker idles
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 2.5
    sleep 0.1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
    assert_equal pids, server.worker_pids
    refute_match(/timeout/, server.log)
  end

  def test_workers_exit_when_the_master_dies
    server = start("worker_processes 2\n", workers: 2)
    pids = wait_for_workers(server, 2)
    Process.kill(:KILL, server.pid)
    wait_until(timeout: 5, message: "orphaned workers gone") do
      pids.none? { |pid| File.exist?("/proc/#{pid}") && !File.read("/proc/#{pid}/stat").include?(") Z ") }
    end
    assert_match(/master is gone/, server.log)
  end

  def test_ttin_and_ttou_change_the_worker_count
    server = start("worker_processes 2\n", workers: 2)
    wait_for_workers(server, 2)
    server.signal(:TTIN)
    wait_for_workers(server, 3)
    # one at a time: two pending signals of one kind are delivered as one
    server.signal(:TTOU)
    wait_for_workers(server, 2)
    server.signal(:TTOU)
    wait_for_workers(server, 1)
    assert_equal "ok", get(server).body
  end

  def test_quit_is_graceful_and_exits_zero
    server = start
    c = server.connect
    c.write("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n")
    wait_until(message: "connection in the worker") { server.connection_fds > 1 }
    server.signal(:QUIT)
    wait_until(message: "QUIT reached the worker") { server.log.include?("finishing requests in progress") }
    c.write("ab")
    assert_equal 200, c.read_response.status
    assert server.wait_exit.success?
    assert_match(/master pid=\d+ exiting/, server.log)
  end

  def test_term_and_int_stop_at_once
    %i[TERM INT].each do |sig|
      server = start
      pids = wait_for_workers(server, 1)
      c = server.connect
      c.write("GET /hang HTTP/1.1\r\nHost: x\r\n\r\n")
      wait_until(message: "request in progress") { server.connection_fds > 1 }
      server.signal(sig)
      server.wait_exit(timeout: 5)
      assert c.closed?(timeout: 5)
      refute File.exist?("/proc/#{pids.first}/cmdline") && !File.read("/proc/#{pids.first}/stat").include?(") Z ")
    end
  end

  def test_hup_reloads_the_config_and_replaces_workers_and_survives_a_broken_one
    server = start("worker_processes 1\n")
    old = wait_for_workers(server, 1)
    conf = File.join(server.dir, "narwhal.conf.rb")
    File.write(conf, "preload_app true\nworker_processes 2\n")
    server.signal(:HUP)
    wait_until(message: "two new workers") do
      pids = server.worker_pids
      pids.size == 2 && (pids & old).empty?
    end
    File.write(conf, "worker_processes 2\nbogus_directive 1\n")
    server.signal(:HUP)
    wait_until(message: "reload error logged") { server.log.include?("error reloading") }
    assert_match(/narwhal.conf.rb:2: unknown directive bogus_directive; keeping the running configuration/, server.log)
    assert_equal "ok", get(server).body
    assert_equal 2, server.worker_pids.size
  end

  def test_usr1_reopens_log_files_in_master_and_workers
    # the log lines go to the file, so start without waiting on them
    server = Narwhal::ServerProcess.new(app: APP, config: "stderr_path 'narwhal.log'\n")
    @servers = [server]
    log = File.join(server.dir, "narwhal.log")
    wait_until(message: "log file written") { File.exist?(log) && File.read(log).include?("ready") }
    File.rename(log, "#{log}.1")
    server.signal(:USR1)
    wait_until(message: "master and worker reopened") do
      File.exist?(log) && File.read(log).include?("master reopened") && File.read(log).include?("reopened 1 log file")
    end
  end

  def test_winch_is_ignored_in_the_foreground
    server = start
    pids = wait_for_workers(server, 1)
    server.signal(:WINCH)
    wait_until(message: "WINCH logged") { server.log.include?("WINCH ignored") }
    assert_equal pids, server.worker_pids
  end

  def voluntary_switches(pid)
    File.read("/proc/#{pid}/status")[/^voluntary_ctxt_switches:\s+(\d+)/, 1].to_i
  end

  # Each wake-up of a worker blocked in epoll_wait is one voluntary context
  # switch. With EPOLLEXCLUSIVE a new connection wakes one of the four idle
  # workers (about 1.2 switches per connection measured); a thundering herd
  # would wake all four (about 4 per connection).
  def test_a_new_connection_wakes_one_idle_worker_not_all
    server = start("worker_processes 4\n", workers: 4)
    pids = wait_for_workers(server, 4)
    connections = 100
    before = pids.sum { |pid| voluntary_switches(pid) }
    connections.times do
      c = server.connect
      c.write("GET / HTTP/1.0\r\n\r\n")
      c.read_to_eof
      c.close
    end
    woken = pids.sum { |pid| voluntary_switches(pid) } - before
    assert_operator woken, :<, 2 * connections, "#{woken} worker wake-ups for #{connections} connections"
  end

  def test_hup_without_preload_app_loads_the_new_code
    server = Narwhal::ServerProcess.start(app: "run ->(e) { [200, { 'content-type' => 'text/plain' }, ['v1']] }\n")
    @servers = [server]
    assert_equal "v1", get(server).body
    File.write(File.join(server.dir, "config.ru"),
               "require 'rack/lint'\nuse Rack::Lint\nrun ->(e) { [200, { 'content-type' => 'text/plain' }, ['v2']] }\n")
    server.signal(:HUP)
    wait_until(message: "new code served") { get(server).body == "v2" }
  end

  def test_signals_sent_to_a_worker_directly
    server = start
    old = wait_for_workers(server, 1).first
    Process.kill(:USR1, old)
    wait_until(message: "worker reopened logs") { server.log.include?("reopened 0 log file(s)") }
    Process.kill(:QUIT, old)
    wait_until(message: "worker replaced") { (pids = server.worker_pids).size == 1 && pids != [old] }
    assert_match(/reaped #<Process::Status: pid #{old} exit 0> worker=0/, server.log)
    replacement = server.worker_pids.first
    # a worker takes signals once it has its own handlers: a TERM in the
    # moment after the fork goes to the master's, inherited, and is lost
    wait_until(message: "the replacement ready") { server.log.include?("ready pid=#{replacement}") }
    Process.kill(:TERM, replacement)
    wait_until(message: "worker replaced after TERM") { (pids = server.worker_pids).size == 1 && pids != [replacement] }
    assert_equal "ok", get(server).body
  end

  def test_working_directory_is_where_the_app_and_relative_paths_live
    app_dir = Dir.mktmpdir("narwhal-wd")
    File.write(File.join(app_dir, "config.ru"),
               "run ->(e) { [200, { 'content-type' => 'text/plain' }, [Dir.pwd]] }\n")
    server = Narwhal::ServerProcess.new(app: APP, config: "working_directory #{app_dir.inspect}\npid 'n.pid'\n",
                                        args: ["config.ru"])
    @servers = [server]
    server.wait_ready
    assert_equal File.realpath(app_dir), File.realpath(get(server).body)
    assert File.exist?(File.join(app_dir, "n.pid")), "relative pid path is under working_directory"
  ensure
    FileUtils.rm_rf(app_dir) if app_dir
  end
end
