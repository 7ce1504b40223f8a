# frozen_string_literal: true

module Narwhal
  module System
    # The Linux control group this process runs in, and the limits of it
    # narwhal cares about: the CPU quota, the memory limit and the most tasks
    # (pids.max, named when a fork is refused). Works with
    # cgroup v2 (the unified hierarchy: cpu.max, memory.max) and v1 (one
    # mount per controller: cpu.cfs_quota_us and cpu.cfs_period_us,
    # memory.limit_in_bytes), hybrid hosts included.
    #
    # The process's cgroup comes from /proc/self/cgroup, the mounts from
    # /proc/self/mountinfo (/sys/fs/cgroup when it lists none). A limit set on
    # a parent group binds its children too, so each limit is the smallest
    # one on the way from the process's group up to the mount's root.
    #
    # Every path is read under `root` (NARWHAL_CGROUP_ROOT, default /), so
    # that a test or an unusual host can point it at another tree. Missing
    # files and garbage mean "no limit found", never an error.
    class Cgroup
      ROOT_ENV = "NARWHAL_CGROUP_ROOT"
      DEFAULT_MOUNT = "/sys/fs/cgroup"
      # v1 writes a huge number (PAGE_COUNTER_MAX pages) for "no limit"
      V1_UNLIMITED = 2**62

      # value: the limit (CPUs as a Rational, or bytes), nil for none found;
      # source: where it was read and what the file said, for the log.
      Reading = Struct.new(:value, :source)

      Mount = Struct.new(:version, :root, :point, :controllers)

      def self.current(env = ENV)
        root = env[ROOT_ENV].to_s
        new(root: root.empty? ? "/" : root)
      end

      attr_reader :root

      def initialize(root: "/")
        @root = root
        @paths = read_paths
        @mounts = read_mounts
      end

      # The CPU quota in CPUs (quota / period).
      def cpu_quota
        limit("cpu") do |version, dir|
          if version == 2
            cpu_max(dir)
          else
            v1_cpu_quota(dir)
          end
        end
      end

      # The memory limit in bytes.
      def memory_limit
        limit("memory") do |version, dir|
          file = version == 2 ? "memory.max" : "memory.limit_in_bytes"
          text = read(dir, file)
          bytes = text && Integer(text, 10, exception: false)
          limited = bytes&.positive? && bytes < V1_UNLIMITED
          [limited ? bytes : nil, file, bytes && !limited ? "#{text} (no limit)" : describe(text)]
        end
      end

      # The most tasks (processes and threads) the group may hold: pids.max,
      # the same file in v1 and v2; the source says pids.current too.
      def pids_limit
        limit("pids") do |_version, dir|
          text = read(dir, "pids.max")
          count = text && Integer(text, 10, exception: false)
          current = describe(read(dir, "pids.current"))
          [count&.positive? ? count : nil, "pids.max", "#{describe(text)} (pids.current #{current})"]
        end
      end

      # A path under the root, as the operator would write it.
      def display(path)
        @root == "/" ? path : path.delete_prefix(@root.chomp("/"))
      end

      private

      # Yields [version, dir] for the process's group and each parent; the
      # block answers [value or nil, file name, what the file said]. The
      # smallest value wins; with none, the process's own group is described.
      def limit(controller)
        version, dirs = directories(controller)
        return Reading.new(nil, "no cgroup with the #{controller} controller found") unless version

        found = dirs.map { |dir| [dir, *yield(version, dir)] }
        best = found.select { |(_, value)| value }.min_by { |(_, value)| value }
        dir, value, file, text = best || found.first
        Reading.new(value, "cgroup v#{version} #{display(File.join(dir, file))}: #{text}")
      end

      def describe(text)
        return "(missing)" if text.nil?

        text.match?(/\A[\w .-]{1,40}\z/) ? text : "#{text[0, 40].inspect} (ignored)"
      end

      def cpu_max(dir)
        text = read(dir, "cpu.max")
        quota, period = text&.split
        quota = Integer(quota, 10, exception: false)
        period = period ? Integer(period, 10, exception: false) : nil
        value = quota&.positive? && period&.positive? ? Rational(quota, period) : nil
        [value, "cpu.max", describe(text)]
      end

      def v1_cpu_quota(dir)
        quota_text = read(dir, "cpu.cfs_quota_us")
        period_text = read(dir, "cpu.cfs_period_us")
        quota = quota_text && Integer(quota_text, 10, exception: false)
        period = period_text && Integer(period_text, 10, exception: false)
        value = quota&.positive? && period&.positive? ? Rational(quota, period) : nil
        # -1 is "no quota"; the period alone says nothing
        [value, "cpu.cfs_quota_us", "#{describe(quota_text)} (cpu.cfs_period_us: #{describe(period_text)})"]
      end

      # [version, [dir, parent, ..., mount point]] of the hierarchy holding
      # `controller`: v1 when a v1 mount has it, else v2; [nil, []] for none.
      def directories(controller)
        v1 = @mounts.find { |m| m.version == 1 && m.controllers.include?(controller) }
        path = v1 && @paths.find { |controllers, _| controllers.include?(controller) }&.last
        return [1, chain(v1, path)] if path

        v2 = @mounts.find { |m| m.version == 2 }
        path = @paths.find { |controllers, _| controllers.empty? }&.last
        return [2, chain(v2, path)] if v2 && path

        [nil, []]
      end

      # The group's directory and its parents up to the mount point. A group
      # outside what the mount shows (another cgroup namespace) is read at
      # the mount point only.
      def chain(mount, path)
        base = under_root(mount.point)
        inside = mount.root == "/" || path == mount.root || path.start_with?("#{mount.root}/")
        relative = inside ? path.delete_prefix(mount.root.chomp("/")) : ""
        relative = "" if relative.split("/").include?("..")
        dir = File.join(base, relative).chomp("/")
        dir = base unless File.directory?(dir)
        dirs = [dir]
        dirs << (dir = File.dirname(dir)) while dir.length > base.length
        dirs
      end

      # /proc/self/cgroup: "ID:controller,list:/path"; v2's line is "0::/path".
      def read_paths
        lines(File.join(under_root("/proc/self"), "cgroup")).filter_map do |line|
          _id, controllers, path = line.split(":", 3)
          next unless path&.start_with?("/")

          [controllers.split(",").map { |c| c.delete_prefix("name=") }, path]
        end
      end

      # /proc/self/mountinfo: "ID PARENT MAJ:MIN ROOT POINT OPTIONS... - TYPE SOURCE SUPER".
      def read_mounts
        mounts = lines(File.join(under_root("/proc/self"), "mountinfo")).filter_map do |line|
          left, right = line.split(" - ", 2)
          fields = left.split
          type, _source, super_options = right&.split
          next unless fields.size >= 5 && %w[cgroup cgroup2].include?(type)

          Mount.new(type == "cgroup2" ? 2 : 1, unescape(fields[3]), unescape(fields[4]), super_options.to_s.split(","))
        end
        mounts.empty? ? default_mounts : mounts
      end

      # Without mountinfo: v2 at /sys/fs/cgroup, or v1's usual directories.
      def default_mounts
        unified = File.exist?(File.join(under_root(DEFAULT_MOUNT), "cgroup.controllers"))
        return [Mount.new(2, "/", DEFAULT_MOUNT, [])] if unified

        @paths.reject { |controllers, _| controllers.empty? }.map do |controllers, _|
          Mount.new(1, "/", File.join(DEFAULT_MOUNT, controllers.join(",")), controllers)
        end
      end

      # mountinfo writes a space in a path as \040
      def unescape(path)
        path.gsub(/\\([0-7]{3})/) { Regexp.last_match(1).to_i(8).chr }
      end

      def under_root(path)
        @root == "/" ? path : File.join(@root, path)
      end

      def read(dir, file)
        File.read(File.join(dir, file), 256).to_s.strip
      rescue SystemCallError, IOError
        nil
      end

      def lines(path)
        File.readlines(path, chomp: true)
      rescue SystemCallError, IOError
        []
      end
    end
  end
end
