# frozen_string_literal: true

require "test_helper"
require "support/fake_cgroup"

# worker_processes :auto in a container, faked: NARWHAL_CGROUP_ROOT points
# narwhal at a tree where the process's cgroup allows 2.5 CPUs and 64 MiB.
class AutoWorkersIntegrationTest < Minitest::Test
  APP = "run ->(env) { [200, { 'content-type' => 'text/plain' }, ['ok']] }\n"

  def setup
    @root = Dir.mktmpdir("narwhal-cgroup-root")
    tree = Narwhal::FakeCgroup.v2(@root, path: "/kubepods/pod1/app", cpus: "0-7")
    tree.write("/sys/fs/cgroup/kubepods/pod1/app/cpu.max", "250000 100000\n")
    tree.write("/sys/fs/cgroup/kubepods/pod1/memory.max", "#{64 * 1024 * 1024}\n")
  end

  def teardown
    @server&.stop
    FileUtils.rm_rf(@root)
  end

  def test_auto_starts_one_worker_per_cpu_of_the_quota_and_warns_about_memory
    @server = Narwhal::ServerProcess.start(app: APP, workers: 3, config: "worker_processes :auto\n",
                                           env: { "NARWHAL_CGROUP_ROOT" => @root, "WEB_CONCURRENCY" => nil })
    wait_until(message: "three workers") { @server.worker_pids.size == 3 }
    log = @server.log
    assert_match(/master pid=\d+ started \(narwhal [^,]+, 3 worker\(s\)\)/, log)
    assert_includes log, "INFO -- : worker_processes :auto chose 3: CPU quota 2.5 CPU(s) " \
                         "(cgroup v2 /sys/fs/cgroup/kubepods/pod1/app/cpu.max: 250000 100000), rounded up\n"
    warning = log[/WARN -- : memory limit .*$/]
    assert_match(%r{\Amemory limit 64.0 MiB \(cgroup v2 /sys/fs/cgroup/kubepods/pod1/memory.max: 67108864\) is lower },
                 warning.to_s.delete_prefix("WARN -- : "))
    assert_match(/is lower than 3 worker\(s\) x \d+\.\d MiB master RSS = \d+\.\d MiB: the kernel may kill workers; /, warning)
    assert warning.end_with?("lower worker_processes or raise the limit"), warning
    client = @server.connect.write("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert_equal 200, client.read_response(timeout: 20).status
    client.close
  end
end
