# frozen_string_literal: true

require "test_helper"
require "support/upgrade_deploy"
require "support/notify_socket"

# Deploys that cannot break (upgrade_timeout, upgrade_health_path): a new
# release that raises at load, whose workers hang at boot, or whose health
# path answers 500 is given up, and the old release serves on; clients
# and a readiness probe see only 200s throughout.
class UpgradeTimeoutTest < Minitest::Test
  include Narwhal::UpgradeDeploy

  def teardown
    super
    @notify&.close
  end

  def test_a_release_whose_config_ru_raises_leaves_the_old_one_serving
    start_release("preload_app false\nupgrade_timeout 20\n")
    deploy(%(raise "release 2 does not load"\n))
    successor = nil
    statuses, probes = deploying do
      @server.signal(:USR2)
      successor = new_master
      wait_until(timeout: 20, message: "the upgrade given up\n#{@server.log}") { @server.log.include?("upgrade failed") }
    end
    assert_old_release_serves(successor)
    assert_match(/upgrade failed: the new master pid=#{successor} gave up: no worker could boot \(3 attempts\), exiting: \S+config.ru:1: release 2 does not load \(RuntimeError\); the old master pid=#{@server.pid} serves on/,
                 @server.log)
    assert_all_200(statuses, "requests")
    assert_all_200(probes, "probes")
  end

  # Unicorn's way to retire the old master (examples/unicorn.conf.rb): the
  # new master's before_fork sends it TTOU, then QUIT at its last fork.
  UNICORN_HOOK = <<~'RUBY'
    before_fork do |server, worker|
      old_pid = "#{server.config[:pid]}.oldbin"
      if old_pid != server.pid
        begin
          sig = (worker.nr + 1) >= server.worker_processes ? :QUIT : :TTOU
          Process.kill(sig, File.read(old_pid).to_i)
        rescue Errno::ENOENT, Errno::ESRCH
        end
      end
    end
  RUBY

  # Workers that never get ready are killed at the deadline (they never took
  # a connection). The old master held back the TTOU and QUIT of Unicorn's
  # hook and lost no worker; with Type=notify the unit stays its own.
  def test_a_release_whose_workers_hang_at_boot_is_given_up_at_upgrade_timeout
    @notify = Narwhal::NotifySocket.new(File.join(Dir.mktmpdir("narwhal-notify"), "notify.sock"))
    start_release("preload_app false\nupgrade_timeout 2\n#{UNICORN_HOOK}", env: { "NOTIFY_SOCKET" => @notify.path })
    old = @server.pid
    @notify.next_message # READY=1 of the first boot
    deploy("sleep\n#{release(2)}")
    successor = nil
    statuses, probes = deploying do
      @server.signal(:USR2)
      successor = new_master
      wait_until(timeout: 20, message: "the upgrade given up\n#{@server.log}") { @server.log.include?("upgrade failed") }
    end
    assert_old_release_serves(successor)
    assert_match(/upgrade failed: 0 of 2 workers ready within upgrade_timeout 2s \(not ready: worker=0 pid=\d+, worker=1 pid=\d+\); exiting, the old master pid=#{old} serves on/, @server.log)
    assert_match(/upgrade failed: the new master pid=#{successor} gave up: 0 of 2 workers ready.* \(dropping the TTOU, QUIT held back for it\)$/, @server.log)
    assert_match(/#{old}\]  INFO -- : QUIT held back: the new master pid=#{successor} is not ready yet \(upgrade_timeout 2s\)/, @server.log)
    assert_equal 2, @server.worker_pids(old).size, "the old master lost a worker"
    refute_match(/worker_processes now/, @server.log)
    assert_all_200(statuses, "requests")
    assert_all_200(probes, "probes")

    assert_equal "starting a new master pid=#{successor}", @notify.next_message.fields["STATUS"]
    failed = @notify.next_message
    assert_equal old, failed.pid
    assert_equal [old.to_s, "1"], failed.fields.values_at("MAINPID", "READY")
    assert_match(/\Aserving, worker_processes 2; upgrade failed: the new master pid=#{successor} gave up: /,
                 failed.fields["STATUS"])
    assert_empty @notify.pending.select { |m| m.pid == successor }, "the new master spoke for the unit"
  end

  # Each new worker asks its app for /up before it serves: a release that
  # answers 500 never serves a client.
  def test_a_release_whose_health_path_answers_500_never_serves
    start_release(%(upgrade_timeout 20\nupgrade_health_path "/up"\n))
    deploy(release(2, status: 500))
    successor = nil
    statuses, probes = deploying do
      @server.signal(:USR2)
      successor = new_master
      wait_until(timeout: 20, message: "the upgrade given up\n#{@server.log}") { @server.log.include?("upgrade failed") }
    end
    assert_old_release_serves(successor)
    assert_match(/worker=\d+ pid=\d+ failed to boot: upgrade_health_path: GET \/up answered 500, not 200/, @server.log)
    assert_match(/upgrade failed: the new master pid=#{successor} gave up: no worker could boot/, @server.log)
    assert_all_200(statuses, "requests")
    assert_all_200(probes, "probes")
  end
end
