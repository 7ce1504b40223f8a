# frozen_string_literal: true

require "test_helper"

# fork refused while request threads run, allowed otherwise.
class ForkGuardTest < Minitest::Test
  def test_fork_raises_while_armed_and_works_once_disarmed
    Narwhal::Dispatcher::ForkGuard.arm(4)
    error = assert_raises(Narwhal::ForkError) { fork { exit!(0) } }
    assert_match(/request threads \(threads 4\)/, error.message)
    assert_raises(Narwhal::ForkError) { IO.popen("-") { nil } }
    Narwhal::Dispatcher::ForkGuard.disarm
    pid = fork { exit!(7) }
    assert_equal 7, Process.wait2(pid).last.exitstatus
    assert_equal "spawned\n", IO.popen(["echo", "spawned"], &:read), "spawn is never refused"
  ensure
    Narwhal::Dispatcher::ForkGuard.disarm
  end
end
