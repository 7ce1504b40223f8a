# frozen_string_literal: true

require "test_helper"
require "minitest/mock"

# The master's fork with a watchdog. A refused fork needs a kernel that
# refuses (test/integration/master_faults_test.rb runs one under
# RLIMIT_NPROC); here: a watchdog that fires at once never costs a child
# that was born, in the parent or in the child.
class ForkerTest < Minitest::Test
  Forker = Narwhal::Master::Forker

  def test_forks_and_the_child_runs_its_block
    reader, writer = IO.pipe
    pid = Forker.new.fork do
      writer.write("child #{Process.pid}")
      exit!(7)
    end
    writer.close
    _, status = Process.wait2(pid)
    assert_equal 7, status.exitstatus
    assert_equal "child #{pid}", reader.read
  end

  # With no patience at all the watchdog races every fork: a fork either
  # fails with ForkRefused or hands back a child that runs to its end.
  def test_a_watchdog_firing_as_the_fork_succeeds_is_dropped_in_parent_and_child
    forker = Forker.new(patience: 0, explain: -> { "RLIMIT_NPROC 1 for uid 1" })
    results = Array.new(20) do
      pid = forker.fork do
        sleep 0.01 # a blocking call: a pending ForkRefused would land here
        exit!(0)
      end
      Process.wait2(pid).last.exitstatus
    rescue Narwhal::Master::ForkRefused => e
      assert_equal "the kernel refused a new process (resource temporarily unavailable); RLIMIT_NPROC 1 for uid 1",
                   e.message
      :refused
    end
    assert_equal [0], results.uniq - [:refused], "every child born ran to its end"
    sleep 0.01 # nothing pending in this thread either
  end

  def test_an_error_fork_raises_itself_is_passed_on
    forker = Forker.new
    Process.stub(:fork, ->(*) { raise Errno::ENOMEM, "fork(2)" }) do
      assert_raises(Errno::ENOMEM) { forker.fork { exit!(0) } }
    end
  end
end
