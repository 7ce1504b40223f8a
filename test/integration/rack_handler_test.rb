# frozen_string_literal: true

require "test_helper"
require "net/http"
require "rack"
require_relative "../support/command_process"

# `rackup -s narwhal` (rackup 2 on Rack 3, Rack 2.2's own rackup on 2.2):
# Narwhal's config file is found and obeyed (workers, timeout, hooks),
# WEB_CONCURRENCY sets the worker count when nothing else does, and the
# command line's address wins over the file's listen lines.
class RackHandlerTest < Minitest::Test
  RACKUP = (Gem.loaded_specs["rackup"] || Gem.loaded_specs.fetch("rack")).bin_file("rackup")

  APP = <<~'RU'
    run lambda { |env|
      sleep 30 if env["PATH_INFO"] == "/hang"
      [200, { "content-type" => "text/plain" }, [Process.pid.to_s]]
    }
  RU

  READY = /worker=0 ready/

  def teardown
    @servers&.each(&:stop)
  end

  # Starts rackup in a new directory holding config.ru and `files`.
  def start_rackup(*args, files: {}, env: {})
    dir = Dir.mktmpdir("narwhal-rackup")
    { "config.ru" => APP }.merge(files).each do |name, text|
      FileUtils.mkdir_p(File.dirname(File.join(dir, name)))
      File.write(File.join(dir, name), text)
    end
    argv = [RbConfig.ruby, RACKUP, "-s", "narwhal", "-o", "127.0.0.1", "-p", "0", *args, "config.ru"]
    server = Narwhal::CommandProcess.new(argv, dir: dir, env: child_env.merge(env))
    (@servers ||= []) << server
    server
  end

  def rackup(*args, workers: 1, **kw)
    start_rackup(*args, **kw).wait_ready(workers: workers, timeout: 30)
  end

  def child_env
    env = ENV.to_h.reject { |k, _| %w[WEB_CONCURRENCY NARWHAL_CONFIG].include?(k) }
    env.merge("RUBYLIB" => [File.join(Narwhal::ServerProcess::ROOT, "lib"), ENV["RUBYLIB"]].compact.join(":"))
  end

  def get(server, path = "/", read_timeout: 10)
    Net::HTTP.start(server.host, server.port, open_timeout: 5, read_timeout: read_timeout) { |h| h.get(path) }
  end

  def wait_for_workers(server, count)
    wait_until(timeout: 15, message: "#{count} worker(s)") do
      pids = server.worker_pids
      pids if pids.size == count
    end
  end

  def test_config_narwhal_rb_sets_workers_timeout_and_hooks_and_the_command_line_address_wins
    config = <<~RB
      worker_processes 2
      timeout 2
      listen "127.0.0.1:1"
      after_worker_ready { |server, worker| server.logger.info("hook: worker=\#{worker.nr} ready") }
    RB
    server = rackup(files: { "config/narwhal.rb" => config }, workers: 2)
    pids = wait_for_workers(server, 2)
    served = Array.new(20) { get(server).body.to_i }.uniq
    assert_empty served - pids, "served by #{served}, workers #{pids}"
    refute_includes served, server.pid
    log = server.log
    assert_includes log, "config_file=#{server.dir}/config/narwhal.rb (from config/narwhal.rb)"
    assert_includes log, "listen 127.0.0.1:1 of #{server.dir}/config/narwhal.rb replaced by 127.0.0.1:0 " \
                         "from the command line"
    assert_equal %w[0 1], log.scan(/hook: worker=(\d) ready/).flatten.sort

    # the file's timeout: a request stuck for longer is answered 504 and
    # loses its worker
    assert_equal "504", get(server, "/hang", read_timeout: 20).code
    wait_until(message: "the kill's line") { server.log.match?(/worker=\d pid=\d+ timeout/) } # after the answer
    wait_until(timeout: 15, message: "a replacement worker") { (server.worker_pids - pids).any? }

    server.signal(:TERM)
    assert server.wait_exit(timeout: 15).success?, server.log
    assert_empty server.worker_pids
  end

  def test_web_concurrency_sets_the_worker_count_when_no_config_file_does
    server = rackup(env: { "WEB_CONCURRENCY" => "3" }, workers: 3)
    assert_equal 3, wait_for_workers(server, 3).size
    assert_match(/no config file \(-O config_file, NARWHAL_CONFIG or \S+config\/narwhal\.rb\)/, server.log)

    server = rackup(files: { "config/narwhal.rb" => "timeout 30\n" }, env: { "WEB_CONCURRENCY" => "3" }, workers: 3)
    assert_equal 3, wait_for_workers(server, 3).size
  end

  def test_lookup_order_o_config_file_then_narwhal_config_then_config_narwhal_rb
    files = { "config/narwhal.rb" => "worker_processes 4\n", "env.rb" => "worker_processes 2\n",
              "option.rb" => "worker_processes 1\n" }
    env = { "NARWHAL_CONFIG" => "env.rb", "WEB_CONCURRENCY" => "3" }

    server = rackup("-O", "config_file=option.rb", files: files, env: env)
    assert_equal 1, wait_for_workers(server, 1).size
    assert_includes server.log, "config_file=#{server.dir}/option.rb (from -O config_file)"

    server = rackup(files: files, env: env, workers: 2)
    assert_equal 2, wait_for_workers(server, 2).size
    assert_includes server.log, "config_file=#{server.dir}/env.rb (from NARWHAL_CONFIG)"
  end

  def test_a_bad_config_file_or_web_concurrency_stops_rackup_with_the_reason
    server = start_rackup(files: { "config/narwhal.rb" => "timeout 30\nworker_processes 0\n" })
    refute server.wait_exit(timeout: 30).success?
    assert_match %r{^narwhal: #{Regexp.escape(server.dir)}/config/narwhal\.rb:2: .*worker_processes}, server.log

    server = start_rackup(env: { "WEB_CONCURRENCY" => "many" })
    refute server.wait_exit(timeout: 30).success?
    assert_includes server.log, 'narwhal: WEB_CONCURRENCY="many" is not a worker count (a whole number >= 1, or auto)'
  end

  def test_rackup_pid_file_outlives_a_retired_worker
    server = rackup("-P", "rackup.pid", files: { "config/narwhal.rb" => "worker_processes 2\n" }, workers: 2)
    pid_file = File.join(server.dir, "rackup.pid")
    wait_for_workers(server, 2)
    assert_equal server.pid, read_pid(pid_file)

    server.signal(:TTOU)
    wait_until(timeout: 15, message: "a worker reaped") { server.log.include?("reaped") }
    wait_for_workers(server, 1)
    # the worker's exit removed it (rackup's at_exit); the master writes it
    # back right after it logged the reaping
    wait_until(timeout: 5, message: "the pid file back") { read_pid(pid_file) == server.pid }
  end

  # The master refuses USR2 itself: nothing is forked, the pid file keeps
  # its name, and the file's before_exec hook is neither run nor replaced.
  def test_usr2_is_refused_with_a_reason_and_the_master_carries_on_also_after_hup
    hook = "before_exec { |server| server.logger.info('before_exec of the file ran') }\n"
    server = rackup("-P", "rackup.pid", files: { "config/narwhal.rb" => "timeout 20\n#{hook}" })
    server.signal(:HUP) # the reloaded configuration keeps refusing
    wait_until(timeout: 15, message: "HUP's new worker") { server.log.scan(READY).size == 2 }
    worker = wait_for_workers(server, 1).first
    server.signal(:USR2)
    refusal = "USR2: re-exec is not available under rackup or rails server " \
              "(run `narwhal -c FILE` for upgrades without downtime); carrying on"
    wait_until(timeout: 15, message: "the refusal") { server.log.include?(refusal) }
    refute_includes server.log, "re-executing"
    refute_includes server.log, "before_exec of the file ran"
    assert_equal server.pid, read_pid(File.join(server.dir, "rackup.pid"))
    refute File.exist?(File.join(server.dir, "rackup.pid.oldbin"))
    assert_equal worker, get(server).body.to_i
  end
end
