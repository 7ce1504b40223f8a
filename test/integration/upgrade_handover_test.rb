# frozen_string_literal: true

require "test_helper"
require "support/upgrade_deploy"

# The hand-over between two generations after USR2, as a readiness probe
# and the clients see it: /ready on the control port stays 200 while
# either generation serves.
class UpgradeHandoverTest < Minitest::Test
  include Narwhal::UpgradeDeploy

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
end
