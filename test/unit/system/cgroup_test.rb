# frozen_string_literal: true

require "test_helper"
require "support/fake_cgroup"

# Narwhal::System::Cgroup over fake trees: what a container's limits look like on
# cgroup v1 and v2, nested groups, no limit and files that make no sense.
class CgroupTest < Minitest::Test
  G = 1024 * 1024 * 1024

  def setup
    @dir = Dir.mktmpdir("narwhal-cgroup")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def cgroup
    Narwhal::System::Cgroup.new(root: @dir)
  end

  def test_v2_cpu_max_and_memory_max_of_the_process_group
    tree = Narwhal::FakeCgroup.v2(@dir, path: "/kubepods/pod1/c1")
    tree.write("/sys/fs/cgroup/kubepods/pod1/c1/cpu.max", "150000 100000\n")
    tree.write("/sys/fs/cgroup/kubepods/pod1/c1/memory.max", "#{G}\n")
    assert_equal Rational(3, 2), cgroup.cpu_quota.value
    assert_equal "cgroup v2 /sys/fs/cgroup/kubepods/pod1/c1/cpu.max: 150000 100000", cgroup.cpu_quota.source
    assert_equal G, cgroup.memory_limit.value
    assert_equal "cgroup v2 /sys/fs/cgroup/kubepods/pod1/c1/memory.max: #{G}", cgroup.memory_limit.source
  end

  # Named when a fork is refused: pids.max, with pids.current beside it.
  def test_pids_max_of_the_group_or_none
    tree = Narwhal::FakeCgroup.v2(@dir, path: "/kubepods/pod1")
    assert_nil cgroup.pids_limit.value
    tree.write("/sys/fs/cgroup/kubepods/pod1/pids.max", "max\n")
    assert_nil cgroup.pids_limit.value
    tree.write("/sys/fs/cgroup/kubepods/pids.max", "64\n").write("/sys/fs/cgroup/kubepods/pids.current", "64\n")
    assert_equal 64, cgroup.pids_limit.value
    assert_equal "cgroup v2 /sys/fs/cgroup/kubepods/pids.max: 64 (pids.current 64)", cgroup.pids_limit.source
  end

  def test_v2_max_is_no_limit
    tree = Narwhal::FakeCgroup.v2(@dir, path: "/app")
    tree.write("/sys/fs/cgroup/app/cpu.max", "max 100000\n").write("/sys/fs/cgroup/app/memory.max", "max\n")
    assert_nil cgroup.cpu_quota.value
    assert_equal "cgroup v2 /sys/fs/cgroup/app/cpu.max: max 100000", cgroup.cpu_quota.source
    assert_nil cgroup.memory_limit.value
  end

  # A parent's limit binds its children: the smallest on the way up wins.
  def test_nested_groups_take_the_smallest_limit_up_to_the_mount
    tree = Narwhal::FakeCgroup.v2(@dir, path: "/system.slice/app.slice/narwhal.service")
    tree.write("/sys/fs/cgroup/system.slice/app.slice/narwhal.service/cpu.max", "max 100000")
    tree.write("/sys/fs/cgroup/system.slice/app.slice/cpu.max", "50000 100000")
    tree.write("/sys/fs/cgroup/system.slice/cpu.max", "400000 100000")
    tree.write("/sys/fs/cgroup/system.slice/app.slice/narwhal.service/memory.max", "#{2 * G}")
    tree.write("/sys/fs/cgroup/system.slice/memory.max", "#{G}")
    assert_equal Rational(1, 2), cgroup.cpu_quota.value
    assert_equal "cgroup v2 /sys/fs/cgroup/system.slice/app.slice/cpu.max: 50000 100000", cgroup.cpu_quota.source
    assert_equal G, cgroup.memory_limit.value
    assert_equal "cgroup v2 /sys/fs/cgroup/system.slice/memory.max: #{G}", cgroup.memory_limit.source
  end

  def test_v1_cfs_quota_and_period_and_memory_limit
    tree = Narwhal::FakeCgroup.v1(@dir, path: "/docker/abc")
    tree.write("/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "250000\n")
    tree.write("/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n")
    tree.write("/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "#{512 * 1024 * 1024}\n")
    assert_equal Rational(5, 2), cgroup.cpu_quota.value
    assert_equal "cgroup v1 /sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us: 250000 (cpu.cfs_period_us: 100000)",
                 cgroup.cpu_quota.source
    assert_equal 512 * 1024 * 1024, cgroup.memory_limit.value
  end

  # -1 is v1's "no quota"; its "no memory limit" is a huge page-rounded number.
  def test_v1_minus_one_and_the_unlimited_value_are_no_limit
    tree = Narwhal::FakeCgroup.v1(@dir)
    tree.write("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n")
    tree.write("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n")
    tree.write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n")
    assert_nil cgroup.cpu_quota.value
    assert_equal "cgroup v1 /sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us: -1 (cpu.cfs_period_us: 100000)",
                 cgroup.cpu_quota.source
    assert_nil cgroup.memory_limit.value
    assert_match(/memory.limit_in_bytes: 9223372036854771712 \(no limit\)\z/, cgroup.memory_limit.source)
  end

  # Inside a container with its own cgroup namespace the mount's root is
  # the group itself; a path outside the mount is read at the mount point.
  def test_a_mount_of_a_subtree_maps_the_process_path_into_it
    tree = Narwhal::FakeCgroup.new(@dir)
    tree.membership("0::/kubepods/pod1/c1")
    tree.mount("/sys/fs/cgroup", type: "cgroup2", root: "/kubepods/pod1/c1")
    tree.write("/sys/fs/cgroup/cpu.max", "300000 100000")
    assert_equal 3, cgroup.cpu_quota.value
    tree.write("/sys/fs/cgroup/0/cpu.max", "100000 100000") # what a prefix match would wrongly read
    ["/kubepods/pod1/c10", "/kubepods/pod1/c1/../../etc"].each do |outside|
      tree.membership("0::#{outside}")
      assert_equal 3, cgroup.cpu_quota.value, outside
      assert_equal "cgroup v2 /sys/fs/cgroup/cpu.max: 300000 100000", cgroup.cpu_quota.source
    end
  end

  # A hybrid host (systemd's v1 controllers plus an empty unified mount):
  # the cpu controller lives in v1.
  def test_hybrid_hosts_read_the_v1_controller
    tree = Narwhal::FakeCgroup.new(@dir)
    tree.membership("3:cpu,cpuacct:/svc", "0::/svc")
    tree.mount("/sys/fs/cgroup/cpu,cpuacct", options: "rw,cpu,cpuacct")
    tree.mount("/sys/fs/cgroup/unified", type: "cgroup2")
    tree.write("/sys/fs/cgroup/cpu,cpuacct/svc/cpu.cfs_quota_us", "100000")
    tree.write("/sys/fs/cgroup/cpu,cpuacct/svc/cpu.cfs_period_us", "100000")
    assert_equal 1, cgroup.cpu_quota.value
    assert_nil cgroup.memory_limit.value # no memory controller anywhere: v2's files are absent
    assert_equal "cgroup v2 /sys/fs/cgroup/unified/memory.max: (missing)", cgroup.memory_limit.source
  end

  def test_without_mountinfo_v2_is_looked_for_at_sys_fs_cgroup
    tree = Narwhal::FakeCgroup.new(@dir)
    tree.membership("0::/app")
    tree.write("/sys/fs/cgroup/cgroup.controllers", "cpu memory\n")
    tree.write("/sys/fs/cgroup/app/cpu.max", "200000 100000")
    assert_equal 2, cgroup.cpu_quota.value
  end

  def test_garbage_is_no_limit_and_is_shown_for_what_it_is
    tree = Narwhal::FakeCgroup.v2(@dir, path: "/app")
    ["", "banana", "100000", "-5 100000", "100000 0", "1e5 100000", "\x00\xff 10"].each do |text|
      tree.write("/sys/fs/cgroup/app/cpu.max", text)
      assert_nil cgroup.cpu_quota.value, text.inspect
    end
    tree.write("/sys/fs/cgroup/app/cpu.max", "x" * 300)
    assert_equal "cgroup v2 /sys/fs/cgroup/app/cpu.max: #{('x' * 40).inspect} (ignored)", cgroup.cpu_quota.source
    ["lots", "-1", "0", "12.5"].each do |text|
      tree.write("/sys/fs/cgroup/app/memory.max", text)
      assert_nil cgroup.memory_limit.value, text.inspect
    end
  end

  def test_garbage_in_proc_and_nothing_at_all
    assert_nil cgroup.cpu_quota.value
    assert_equal "no cgroup with the cpu controller found", cgroup.cpu_quota.source
    tree = Narwhal::FakeCgroup.new(@dir)
    tree.write("/proc/self/cgroup", "nonsense\n::\n0::relative\n")
    tree.write("/proc/self/mountinfo", "garbage - cgroup2\n1 2 3\n")
    assert_nil cgroup.cpu_quota.value
    assert_nil cgroup.memory_limit.value
  end

  def test_the_root_comes_from_the_environment
    assert_equal "/", Narwhal::System::Cgroup.current({}).root
    assert_equal "/", Narwhal::System::Cgroup.current("NARWHAL_CGROUP_ROOT" => "").root
    assert_equal @dir, Narwhal::System::Cgroup.current("NARWHAL_CGROUP_ROOT" => @dir).root
  end
end
