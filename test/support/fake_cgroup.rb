# frozen_string_literal: true

require "fileutils"

module Narwhal
  # A directory laid out as / looks to Narwhal::System::Cgroup and Configurator::AutoWorkers
  # (NARWHAL_CGROUP_ROOT points there): proc/self/{cgroup,mountinfo,status}
  # and the cgroup files under sys/fs/cgroup.
  class FakeCgroup
    V2_MOUNT = "/sys/fs/cgroup"

    attr_reader :root

    def initialize(root)
      @root = root
      @mounts = []
    end

    # A unified (v2) host: the process in `path`, cgroup2 mounted at /sys/fs/cgroup.
    def self.v2(root, path: "/", cpus: "0-7")
      new(root).tap do |tree|
        tree.membership("0::#{path}")
        tree.mount(V2_MOUNT, type: "cgroup2")
        tree.cpus(cpus)
      end
    end

    # A v1 host: cpu,cpuacct and memory mounts, the process in `path` in both.
    def self.v1(root, path: "/", cpus: "0-7")
      new(root).tap do |tree|
        tree.membership("4:memory:#{path}", "3:cpu,cpuacct:#{path}", "1:name=systemd:#{path}", "0::/")
        tree.mount("#{V2_MOUNT}/cpu,cpuacct", options: "rw,cpu,cpuacct")
        tree.mount("#{V2_MOUNT}/memory", options: "rw,memory")
        tree.cpus(cpus)
      end
    end

    def membership(*lines)
      write("/proc/self/cgroup", lines.map { |l| "#{l}\n" }.join)
    end

    # One line of /proc/self/mountinfo; `root` is the mounted subtree.
    def mount(point, type: "cgroup", root: "/", options: "rw")
      @mounts << "#{30 + @mounts.size} 23 0:#{40 + @mounts.size} #{root} #{point.gsub(' ', '\\\\040')} " \
                 "rw,nosuid,nodev,noexec,relatime shared:9 - #{type} #{type} #{options}\n"
      write("/proc/self/mountinfo", "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n#{@mounts.join}")
      FileUtils.mkdir_p(File.join(@root, point))
    end

    def cpus(list)
      write("/proc/self/status", "Name:\truby\nCpus_allowed:\tff\nCpus_allowed_list:\t#{list}\nVmRSS:\t100 kB\n")
    end

    # A file at an absolute path of the fake tree.
    def write(path, text)
      full = File.join(@root, path)
      FileUtils.mkdir_p(File.dirname(full))
      File.write(full, text)
      self
    end
  end
end
