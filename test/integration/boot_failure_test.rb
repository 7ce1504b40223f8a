# frozen_string_literal: true

require "test_helper"
require "net/http"
require "time"

# A config.ru that does not load: reported once with its file and line,
# never a crash loop. With preload_app the master stops before it binds or
# forks; without it, workers that fail to boot are retried with a growing
# delay, and the master gives up when none ever became ready.
class BootFailureTest < Minitest::Test
  SYNTAX_ERROR = "run ->(env) { [200, {}, ['never']]\n" # line 1: no closing brace
  NAME_ERROR = "x = 1\nrun NoSuchApp\n" # line 2
  # every fork the master makes leaves a line in FORKS
  COUNT_FORKS = "before_fork { |_server, worker| File.open(File.join(__dir__, 'forks'), 'a') { |f| f.puts(worker.nr) } }\n"
  LOG_LIMIT = 4096 # bytes: a few lines, not a flood

  def teardown
    @servers&.each(&:stop)
    @pids&.each do |pid|
      Process.kill(:KILL, pid)
    rescue Errno::ESRCH
      nil
    end
  end

  def launch(**kw)
    server = Narwhal::ServerProcess.new(lint: false, **kw)
    (@servers ||= []) << server
    server
  end

  def forks(server)
    path = File.join(server.dir, "forks")
    File.exist?(path) ? File.readlines(path).size : 0
  end

  def free_port
    TCPServer.new("127.0.0.1", 0).then { |s| s.addr[1].tap { s.close } }
  end

  def assert_stops_before_binding(app, error)
    port = free_port
    server = launch(app: app, listen: "127.0.0.1:#{port}", config: "preload_app true\n#{COUNT_FORKS}")
    status = server.wait_exit(timeout: 20)
    log = server.log
    refute status.success?, log
    assert_includes log, "narwhal: the app failed to load: #{server.dir}/config.ru:#{error}"
    refute_match(/listening/i, log, "nothing is bound")
    assert_equal 0, forks(server), "nothing is forked"
    refute_match(/builder\.rb|app_builder\.rb/, log, "no backtrace")
    assert_operator log.bytesize, :<, 512
    assert_raises(Errno::ECONNREFUSED) { TCPSocket.new("127.0.0.1", port).close }
  end

  def test_preload_with_a_syntax_error_exits_before_binding_or_forking
    assert_stops_before_binding(SYNTAX_ERROR, "1: syntax error")
  end

  def test_preload_with_a_name_error_exits_before_binding_or_forking
    assert_stops_before_binding(NAME_ERROR, "2: uninitialized constant NoSuchApp")
  end

  def test_without_preload_the_master_gives_up_when_no_worker_ever_booted
    server = launch(app: NAME_ERROR, config: "worker_processes 2\n#{COUNT_FORKS}")
    status = server.wait_exit(timeout: 30)
    log = server.log
    refute status.success?, log
    error = "#{server.dir}/config.ru:2: uninitialized constant NoSuchApp"
    assert_includes log, "failed to boot: #{error}"
    assert_includes log, "no worker could boot (3 attempts), exiting: #{error}"
    # a first round of 2 workers, then one worker per later attempt
    assert_operator forks(server), :<=, 4
    assert_equal 1, log.scan("failed to boot: ").size, "the same error is written out once\n#{log}"
    refute_match(/builder\.rb/, log, "no backtrace")
    assert_operator log.bytesize, :<, LOG_LIMIT
  end

  def failure_times(log)
    log.scan(/^E, \[(\S+) #\d+\] ERROR -- : worker=0 pid=\d+ failed to boot/).flatten.map { |t| Time.iso8601(t) }
  end

  # After serving, the app breaks (a deploy, then HUP): the master keeps
  # trying, waiting twice as long each time, and QUIT is not held up by
  # the wait.
  def test_a_worker_that_served_and_then_cannot_boot_is_retried_with_growing_delays
    good = "class App\n  def self.call(_env) = [200, { 'content-type' => 'text/plain' }, ['v1']]\nend\n"
    server = launch(app: "require_relative 'app'\nrun App\n", files: { "app.rb" => good }, config: COUNT_FORKS)
    server.wait_ready
    assert_equal "v1", Net::HTTP.get(server.host, "/", server.port)

    File.write(File.join(server.dir, "app.rb"), "#{good}MissingConstant\n")
    server.signal(:HUP)
    times = wait_until(timeout: 30, message: "four failed boots\n#{server.log}") do
      t = failure_times(server.log)
      t if t.size >= 4
    end
    log = server.log
    gaps = times.each_cons(2).map { |a, b| b - a }
    gaps.each_with_index do |gap, i|
      floor = Narwhal::Master::RespawnPolicy.delay(i + 1)
      assert_operator gap, :>=, floor * 0.9, "attempt #{i + 2} came #{gap}s after the previous one\n#{log}"
    end
    assert_operator forks(server), :<=, 1 + 5, log
    assert_equal 1, log.scan("uninitialized constant MissingConstant").size, "the error is written out once\n#{log}"
    assert_includes log, "failed to boot: #{server.dir}/app.rb:4: uninitialized constant MissingConstant"
    assert_match(/4 failure\(s\) in a row, next attempt in 4s/, log)
    refute_match(/no worker could boot/, log, "a master whose app once served keeps trying")

    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    server.signal(:QUIT)
    assert server.wait_exit(timeout: 10).success?
    waited = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    assert_operator waited, :<, 3, "QUIT waited for the back-off"
  end

  def narwhal_daemon(dir, *args)
    out = File.join(dir, "launcher.out")
    pid = Process.spawn(RbConfig.ruby, "-I", File.join(Narwhal::ServerProcess::ROOT, "lib"),
                        Narwhal::ServerProcess::EXE, "-D", "-N", "-l", "127.0.0.1:0", *args,
                        chdir: dir, out: out, err: out)
    (@pids ||= []) << pid
    _, status = Timeout.timeout(30) { Process.wait2(pid) }
    [status, File.read(out)]
  end

  def test_daemonize_exits_non_zero_with_the_error_when_the_app_does_not_load
    Dir.mktmpdir("narwhal-daemon") do |dir|
      File.write(File.join(dir, "config.ru"), NAME_ERROR)
      File.write(File.join(dir, "preload.rb"), "preload_app true\n")
      error = "#{dir}/config.ru:2: uninitialized constant NoSuchApp"

      status, out = narwhal_daemon(dir, "config.ru")
      refute status.success?, out
      assert_match(/\Anarwhal: no worker could boot \(3 attempts\), exiting: #{Regexp.escape(error)}.*\n\z/, out)

      status, out = narwhal_daemon(dir, "-c", "preload.rb", "config.ru")
      refute status.success?, out
      assert_match(/\Anarwhal: the app failed to load: #{Regexp.escape(error)}.*\n\z/, out)
    end
  end
end
