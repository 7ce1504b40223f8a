# frozen_string_literal: true

require "test_helper"
require "support/fake_cgroup"

# worker_processes :auto: the count and the one line saying why.
class AutoWorkersTest < Minitest::Test
  def setup
    @dir = Dir.mktmpdir("narwhal-auto")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def choose(max: 4096)
    Narwhal::Configurator::AutoWorkers.choose({ "NARWHAL_CGROUP_ROOT" => @dir }, max: max)
  end

  def test_a_fractional_quota_is_rounded_up
    tree = Narwhal::FakeCgroup.v2(@dir, path: "/app", cpus: "0-7")
    tree.write("/sys/fs/cgroup/app/cpu.max", "150000 100000")
    choice = choose
    assert_equal 2, choice.count
    assert_equal "worker_processes :auto chose 2: CPU quota 1.5 CPU(s) " \
                 "(cgroup v2 /sys/fs/cgroup/app/cpu.max: 150000 100000), rounded up", choice.reason
    tree.write("/sys/fs/cgroup/app/cpu.max", "10000 100000") # a tenth of a CPU still runs one worker
    assert_equal 1, choose.count
  end

  def test_a_whole_quota_on_v1
    tree = Narwhal::FakeCgroup.v1(@dir, cpus: "0-7")
    tree.write("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "300000")
    tree.write("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000")
    assert_equal 3, choose.count
    assert_match(/chose 3: CPU quota 3 CPU\(s\) \(cgroup v1 .*cpu.cfs_quota_us: 300000/, choose.reason)
  end

  def test_without_a_quota_the_cpus_this_process_may_run_on
    tree = Narwhal::FakeCgroup.v2(@dir, path: "/app", cpus: "0-2,8,10-11")
    tree.write("/sys/fs/cgroup/app/cpu.max", "max 100000")
    choice = choose
    assert_equal 6, choice.count
    assert_equal "worker_processes :auto chose 6: no cgroup CPU quota (cgroup v2 /sys/fs/cgroup/app/cpu.max: " \
                 "max 100000); 6 CPU(s) this process may run on (Cpus_allowed_list 0-2,8,10-11)", choice.reason
  end

  # A quota above the CPUs the process may use would only add waiting workers.
  def test_a_quota_beyond_the_allowed_cpus_is_cut_to_them
    tree = Narwhal::FakeCgroup.v2(@dir, path: "/app", cpus: "2-3")
    tree.write("/sys/fs/cgroup/app/cpu.max", "800000 100000")
    assert_equal 2, choose.count
    assert_match(/CPU quota 8 CPU\(s\) .*, but this process may run on 2 CPU\(s\) only \(Cpus_allowed_list 2-3\)/,
                 choose.reason)
  end

  def test_an_unreadable_cpu_list_falls_back_to_etc_nprocessors
    tree = Narwhal::FakeCgroup.v2(@dir, cpus: "zero to three")
    assert_equal Etc.nprocessors, choose.count
    assert_match(/#{Etc.nprocessors} CPU\(s\) this process may run on \(Etc.nprocessors\)\z/, choose.reason)
    File.delete(File.join(tree.root, "proc/self/status"))
    assert_equal Etc.nprocessors, choose.count
  end

  def test_the_count_stays_within_the_scoreboard
    Narwhal::FakeCgroup.v2(@dir, cpus: "0-9999")
    assert_equal 4096, choose.count
    assert_equal 16, choose(max: 16).count
  end

  # The real host, whatever it is: a count a worker table can hold.
  def test_this_host
    choice = Narwhal::Configurator::AutoWorkers.choose({})
    assert_includes 1..Narwhal::Scoreboard::MAX_SLOTS, choice.count
    assert_match(/\Aworker_processes :auto chose #{choice.count}: /, choice.reason)
  end

  def test_the_directive_and_web_concurrency_auto
    tree = Narwhal::FakeCgroup.v2(@dir, path: "/app")
    tree.write("/sys/fs/cgroup/app/cpu.max", "250000 100000")
    file = File.join(@dir, "narwhal.rb")
    File.write(file, "worker_processes :auto\n")
    with_env("NARWHAL_CGROUP_ROOT" => @dir, "WEB_CONCURRENCY" => nil) do
      config = Narwhal::Configurator.new(file: file)
      assert_equal 3, config[:worker_processes]
      assert_match(/\Aworker_processes :auto chose 3: CPU quota 2.5 CPU\(s\)/, config[:worker_processes_auto])
      File.write(file, "worker_processes :auto\nworker_processes 5\n") # the later line wins, and says nothing
      config = Narwhal::Configurator.new(file: file)
      assert_equal 5, config[:worker_processes]
      assert_nil config[:worker_processes_auto]
    end
    with_env("NARWHAL_CGROUP_ROOT" => @dir, "WEB_CONCURRENCY" => "auto") do
      assert_equal 3, Narwhal::Configurator.new[:worker_processes]
    end
  end

  def test_other_symbols_are_refused
    file = File.join(@dir, "narwhal.rb")
    File.write(file, "worker_processes :max\n")
    e = assert_raises(Narwhal::ConfigError) { Narwhal::Configurator.new(file: file) }
    assert_equal "#{file}:1: worker_processes expects an Integer >= 1 or :auto, got :max", e.message
  end
end
