# frozen_string_literal: true

require "test_helper"
require "support/upgrade_deploy"
require "support/notify_socket"

# The hand-over between two generations after USR2, as a readiness probe
# and the clients see it: /ready on the control port stays 200 while
# either generation serves.
class UpgradeHandoverTest < Minitest::Test
  include Narwhal::UpgradeDeploy

  def teardown
    super
    @notify&.close
  end

  # Unicorn's hand-over by hand: once the new workers serve, TTOU takes
  # the old master's workers away one at a time, then QUIT. The old
  # master, with no worker of its own left, must not answer 503 while its
  # successor serves (both answer on the one control socket).
  def test_ready_stays_200_while_the_old_masters_workers_are_taken_away
    start_release
    old = @server.pid
    statuses = probing do |seen|
      @server.signal(:USR2)
      successor = new_master(old)
      wait_until(timeout: 15, message: "new workers ready") { ready_workers(successor).size == 2 }
      count = seen.size
      wait_until(message: "probes while both generations serve") { seen.size >= count + 10 }
      2.downto(1) do |left|
        @server.signal(:TTOU)
        wait_until(message: "old workers down to #{left - 1}") { (@server.worker_pids(old) - [successor]).size == left - 1 }
      end
      count = seen.size
      wait_until(message: "probes with no old worker left") { seen.size >= count + 20 }
      @server.signal(:QUIT)
      assert @server.wait_exit(timeout: 15).success?
    end
    assert_all_200(statuses, "probes")
  end

  # upgrade_retire_old: once every new worker answered /up with 200, the
  # old master retires its workers one at a time and leaves by itself; the
  # unit (Type=notify) follows the new master.
  def test_a_good_release_retires_the_old_master_by_itself
    @notify = Narwhal::NotifySocket.new(File.join(Dir.mktmpdir("narwhal-notify"), "notify.sock"))
    start_release(%(upgrade_timeout 20\nupgrade_health_path "/up"\nupgrade_retire_old true\n),
                  env: { "NOTIFY_SOCKET" => @notify.path })
    old = @server.pid
    @notify.next_message # READY=1 of the first boot
    deploy(release(2))
    successor = nil
    statuses, probes = deploying do
      @server.signal(:USR2)
      successor = new_master
      assert @server.wait_exit(timeout: 30).success?, @server.log
    end
    assert_all_200(statuses, "requests")
    assert_all_200(probes, "probes")
    assert_equal "release 2", body
    assert_equal successor, read_pid(@pid_path)
    refute File.exist?("#{@pid_path}.oldbin")
    log = @server.log
    assert_match(/#{successor}\]  INFO -- : upgrade: all 2 workers ready, each answered GET \/up with 200, [\d.]+s after USR2; telling the old master pid=#{old}$/, log)
    assert_match(/#{old}\]  INFO -- : upgrade succeeded: the new master pid=#{successor} serves with all its workers; retiring the old workers one at a time/, log)
    retired = log.scan(/upgrade: retiring old worker=\d+ pid=\d+ \((\d) retired, (\d) left\)/)
    assert_equal [%w[1 1], %w[2 0]], retired
    first_gone = log.index(/reaped #<Process::Status: pid \d+ exit 0> worker=\d/)
    assert_operator first_gone, :<, log.index("(2 retired, 0 left)"), "the second retired before the first was gone"

    assert_equal "starting a new master pid=#{successor}", @notify.next_message.fields["STATUS"]
    claimed = @notify.next_message
    assert_equal [successor, successor.to_s, "1"], [claimed.pid, *claimed.fields.values_at("MAINPID", "READY")]
    assert_equal "serving, worker_processes 2; upgrade from pid=#{old} succeeded", claimed.fields["STATUS"]
    handed = @notify.next_message
    assert_equal [old, successor.to_s], [handed.pid, handed.fields["MAINPID"]]
    assert_alive_and_serving(successor)
  end

  def assert_alive_and_serving(master)
    assert alive?(master)
    assert_equal 2, ready_workers(master).size
    assert_equal 200, ready_status
  end
end
