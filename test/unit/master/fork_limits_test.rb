# frozen_string_literal: true

require "test_helper"
require "minitest/mock"
require "support/fake_cgroup"

# What a refused fork's log line names: RLIMIT_NPROC and the pids cgroup's
# pids.max, each when it is set.
class ForkLimitsTest < Minitest::Test
  def setup
    @dir = Dir.mktmpdir("narwhal-cgroup")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def describe(nproc)
    Process.stub(:getrlimit, ->(resource) { resource == :NPROC ? [nproc, nproc] : raise(ArgumentError) }) do
      Narwhal::Master::ForkLimits.describe(cgroup: Narwhal::System::Cgroup.new(root: @dir))
    end
  end

  def test_names_the_limits_that_are_set
    tree = Narwhal::FakeCgroup.v2(@dir, path: "/kubepods/pod1")
    assert_nil describe(Process::RLIM_INFINITY), "no limit, nothing to name"
    assert_equal "RLIMIT_NPROC 64 for uid #{Process.uid}", describe(64)
    tree.write("/sys/fs/cgroup/kubepods/pod1/pids.max", "256\n")
    tree.write("/sys/fs/cgroup/kubepods/pod1/pids.current", "256\n")
    assert_equal "RLIMIT_NPROC 64 for uid #{Process.uid}, cgroup v2 /sys/fs/cgroup/kubepods/pod1/pids.max: 256 " \
                 "(pids.current 256)", describe(64)
  end
end
