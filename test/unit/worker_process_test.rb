# frozen_string_literal: true

require "test_helper"
require "logger"
require "net/http"

# A worker's life, run in a forked child with no master at all: only the
# things WorkerProcess is given.
class WorkerProcessTest < Minitest::Test
  def setup
    @dir = Dir.mktmpdir
    @log_path = File.join(@dir, "log")
    @config = Narwhal::Configurator.new
    @config.settings[:logger] = Logger.new(@log_path)
    @config.settings[:after_fork] = lambda do |server, worker|
      File.write(File.join(@dir, "after_fork"), "#{server} #{worker.nr}")
    end
    @listeners = Narwhal::Listener::Set.new(@config.logger, env: {})
    @listeners.open([["127.0.0.1:0", {}]], default: "127.0.0.1:0")
    @reports = Narwhal::Master::WorkerReports.new
    @board = Narwhal::Scoreboard.new(4)
  end

  def teardown
    Process.kill(:KILL, @pid) if @pid && !@status
    Process.wait(@pid) if @pid && !@status
    @listeners.close
    FileUtils.rm_rf(@dir)
  end

  def start(app: nil, app_builder: nil, health_check: nil)
    @pid = fork do
      Narwhal::WorkerProcess.new(
        Narwhal::Worker.new(2), config: @config, hook_server: "the-master", listeners: @listeners,
                                scoreboard: @board, app: app, app_builder: app_builder, master_pipe: nil,
                                reports: @reports, forget_master: -> { File.write(File.join(@dir, "forgot"), "") },
                                health_check: health_check
      ).run
    end
    wait_until(timeout: 15, message: "the ready report") { @reports.drain.find { |_, kind, _| kind == "ready" } }
  end

  def stop
    Process.kill(:QUIT, @pid)
    _, @status = Process.wait2(@pid)
  end

  def get
    Net::HTTP.get(URI("http://#{@listeners.first.address}/"))
  end

  def test_builds_the_app_runs_the_hooks_serves_and_stops_on_quit
    builder = -> { ->(_env) { [200, { "content-type" => "text/plain" }, ["built in the worker"]] } }
    start(app_builder: builder)
    assert_equal "built in the worker", get
    assert_equal "the-master 2", File.read(File.join(@dir, "after_fork")), "hooks get the server they were given"
    assert File.exist?(File.join(@dir, "forgot")), "the master's things were dropped first"
    stop
    assert_equal 0, @status.exitstatus
    assert_equal 1, @board.requests(2), "the worker's own slot counted its request"
    snapshot = @board.snapshot(2)
    assert_equal @pid, snapshot.pid, "the slot names the worker's process"
    assert_equal 1, snapshot.counters[:connections_accepted]
    assert_match(/worker=2 ready pid=#{@pid}/, File.read(@log_path))
  end

  def test_a_preloaded_app_is_served_as_it_is
    start(app: ->(_env) { [200, {}, ["preloaded"]] }, app_builder: -> { flunk "built again" })
    assert_equal "preloaded", get
    stop
    assert @status.success?
  end

  def test_a_hook_that_fails_is_a_boot_failure_reported_to_the_master
    @config.settings[:after_fork] = ->(_server, _worker) { raise ArgumentError, "no database" }
    @pid = fork do
      Narwhal::WorkerProcess.new(
        Narwhal::Worker.new(0), config: @config, hook_server: nil, listeners: @listeners, scoreboard: @board,
                                app: nil, app_builder: -> { flunk }, master_pipe: nil, reports: @reports,
                                forget_master: -> {}
      ).run
    end
    _, @status = Process.wait2(@pid)
    assert_equal Narwhal::WorkerProcess::BOOT_FAILED, @status.exitstatus
    report = @reports.drain.first
    assert_equal [@pid, "failed"], report.first(2)
    assert_match(/no database/, report.last)
  end

  # After USR2 with upgrade_health_path: a worker whose app does not answer
  # the path with 200 fails to boot before it takes any connection.
  def test_a_health_check_the_app_fails_is_a_boot_failure
    check = Narwhal::Master::Upgrade::HealthCheck.new("/up")
    @pid = fork do
      Narwhal::WorkerProcess.new(
        Narwhal::Worker.new(0), config: @config, hook_server: nil, listeners: @listeners, scoreboard: @board,
                                app: ->(env) { [env["PATH_INFO"] == "/up" ? 500 : 200, {}, []] }, app_builder: nil,
                                master_pipe: nil, reports: @reports, forget_master: -> {}, health_check: check
      ).run
    end
    _, @status = Process.wait2(@pid)
    assert_equal Narwhal::WorkerProcess::BOOT_FAILED, @status.exitstatus
    assert_equal [@pid, "failed", "upgrade_health_path: GET /up answered 500, not 200"], @reports.drain.first
    assert_equal 0, @board.snapshot(0).counters[:connections_accepted]
  end

  def test_a_health_check_the_app_passes_serves
    start(app: ->(env) { [200, {}, [env["PATH_INFO"]]] }, health_check: Narwhal::Master::Upgrade::HealthCheck.new("/up"))
    assert_equal "/", get
    stop
  end
end
