# frozen_string_literal: true

require "test_helper"
require "support/fake_cgroup"

class MemoryHeadroomTest < Minitest::Test
  MIB = 1024 * 1024

  def setup
    @dir = Dir.mktmpdir("narwhal-memory")
    @tree = Narwhal::FakeCgroup.v2(@dir, path: "/app")
    @cgroup = Narwhal::System::Cgroup.new(root: @dir)
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def test_a_limit_below_workers_times_the_master_rss_is_a_warning
    @tree.write("/sys/fs/cgroup/app/memory.max", (512 * MIB).to_s)
    assert_equal "memory limit 512.0 MiB (cgroup v2 /sys/fs/cgroup/app/memory.max: #{512 * MIB}) is lower than " \
                 "4 worker(s) x 150.0 MiB master RSS = 600.0 MiB: the kernel may kill workers; " \
                 "lower worker_processes or raise the limit",
                 Narwhal::Master::MemoryHeadroom.warning(4, 150 * MIB, cgroup: @cgroup)
    assert_nil Narwhal::Master::MemoryHeadroom.warning(3, 150 * MIB, cgroup: @cgroup)
  end

  def test_no_limit_or_no_rss_says_nothing
    @tree.write("/sys/fs/cgroup/app/memory.max", "max")
    assert_nil Narwhal::Master::MemoryHeadroom.warning(64, 1024 * MIB, cgroup: @cgroup)
    @tree.write("/sys/fs/cgroup/app/memory.max", MIB.to_s)
    assert_nil Narwhal::Master::MemoryHeadroom.warning(4, nil, cgroup: @cgroup)
  end
end
