# frozen_string_literal: true

require "open3"
require "tmpdir"

module Narwhal
  class Fleet
    # Network namespaces for a fleet on one host: each gets its own address
    # on a veth pair to this (the root) namespace, a /30 of 10.231.0.0/16
    # (ROOT_SIDE .1 here, .2 inside) and its loopback up. Traffic between
    # them crosses only these virtual links. Names carry the creating
    # process's pid (narwhal-fleet-PID-N, veth nwfPIDoN), so that parallel
    # runs never clash; namespaces left by a run whose process is gone are
    # deleted before new ones are made. Needs root and iproute2: anything
    # else fails with the command and its error.
    class Namespaces
      PREFIX = "narwhal-fleet"
      BLOCKS = 16_384 # /30 blocks in 10.231.0.0/16
      LOCK = File.join(Dir.tmpdir, "narwhal-fleet.lock")

      # One namespace: its name, the veth end in this namespace, the
      # addresses on either side.
      Net = Struct.new(:name, :veth, :outside, :inside)

      class Error < RuntimeError; end

      NEEDS = "a fleet needs network namespaces: run as root with iproute2 installed"

      attr_reader :nets

      def initialize(count, owner: Process.pid)
        @owner = owner
        @nets = []
        File.open(LOCK, File::RDONLY | File::CREAT, 0o644) do |lock|
          lock.flock(File::LOCK_EX) # address choice and creation, one run at a time
          remove_orphans
          blocks = free_blocks(count)
          count.times { |i| create(i + 1, blocks[i]) }
        end
      rescue SystemCallError => e
        delete
        raise Error, "#{LOCK}: #{e.message}; #{NEEDS}"
      rescue Error
        delete
        raise
      end

      # Deletes every namespace and veth made here (the veth's inside end
      # goes with its namespace). Processes still inside keep a namespace
      # alive until they exit: stop them first.
      def delete
        @nets.each do |net|
          run("ip", "link", "del", net.veth, quiet: true)
          run("ip", "netns", "del", net.name, quiet: true)
        end
        @nets = []
      end

      # A command that runs the rest of its arguments in net's namespace
      # (`ip netns exec` execs them: the pid stays theirs).
      def self.wrapper(net)
        ["ip", "netns", "exec", net.name]
      end

      private

      def create(number, block)
        name = "#{PREFIX}-#{@owner}-#{number}"
        veth = "nwf#{@owner}o#{number}"
        inner = "nwf#{@owner}i#{number}"
        outside, inside = addresses(block)
        net = Net.new(name, veth, outside, inside)
        run("ip", "netns", "add", name)
        @nets << net # deleted with the rest if a later step fails
        run("ip", "link", "add", veth, "type", "veth", "peer", "name", inner)
        run("ip", "link", "set", inner, "netns", name)
        run("ip", "addr", "add", "#{outside}/30", "dev", veth)
        run("ip", "link", "set", veth, "up")
        run("ip", "netns", "exec", name, "ip", "addr", "add", "#{inside}/30", "dev", inner)
        run("ip", "netns", "exec", name, "ip", "link", "set", inner, "up")
        run("ip", "netns", "exec", name, "ip", "link", "set", "lo", "up")
      end

      def addresses(block)
        third, fourth = block.divmod(64)
        ["10.231.#{third}.#{(fourth * 4) + 1}", "10.231.#{third}.#{(fourth * 4) + 2}"]
      end

      # `count` /30 blocks no interface of this host has an address in,
      # starting at a place that depends on the owner's pid.
      def free_blocks(count)
        used = run("ip", "-o", "-4", "addr", "show").scan(%r{inet 10\.231\.(\d+)\.(\d+)/}).map do |third, fourth|
          (Integer(third) * 64) + (Integer(fourth) / 4)
        end
        start = (@owner * 7) % BLOCKS
        free = (0...BLOCKS).lazy.map { |i| (start + i) % BLOCKS }.reject { |b| used.include?(b) }.first(count)
        raise Error, "no free /30 in 10.231.0.0/16" if free.size < count

        free
      end

      # Namespaces of runs whose process no longer exists.
      def remove_orphans
        run("ip", "netns", "list").scan(/^#{PREFIX}-(\d+)-\d+/o).flatten.uniq.each do |pid|
          next if Integer(pid) == @owner || File.exist?("/proc/#{pid}")

          run("ip", "netns", "list").scan(/^(#{PREFIX}-#{pid}-\d+)/).flatten.each do |name|
            run("ip", "netns", "del", name, quiet: true)
          end
        end
      end

      def run(*argv, quiet: false)
        out, status = Open3.capture2e(*argv)
        return out if status.success? || quiet

        raise Error, "`#{argv.join(' ')}` failed (#{status}): #{out.strip}; #{NEEDS}"
      rescue SystemCallError => e
        return "" if quiet

        raise Error, "`#{argv.join(' ')}`: #{e.message}; #{NEEDS}"
      end
    end
  end
end
