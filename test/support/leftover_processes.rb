# frozen_string_literal: true

module Narwhal
  # No test leaves a process running, even one that fails before its
  # teardown stops what it started. Every process the suite starts inherits
  # MARK (this process's pid) in its environment: narwhal masters and their
  # workers, daemons (-D), masters started by USR2, nginx, haproxy, curl...
  # so the survivors are found in /proc whatever started them and however
  # they got away from their parent. After each test they have GRACE
  # seconds to finish exiting, then get KILL, and the test fails naming
  # them. A server the tests of a class share is kept (#keep: its process
  # group) until its after_run hook stops it; after the run nothing marked
  # may be alive, or the run fails.
  module LeftoverProcesses
    MARK = "STARTED_BY_TEST_PID"
    GRACE = 10 # seconds: a master may still be reaping its workers
    @kept = []

    class << self
      # Marks the processes started from now on (from test_helper, before
      # the first test). A command given a whole environment of its own
      # (unsetenv_others) merges #env into it.
      def install
        ENV[MARK] = Process.pid.to_s
        Minitest::Test.include(AfterEachTest)
        # registered first, so it runs after every other after_run hook
        Minitest.after_run { after_the_run }
      end

      def env
        { MARK => Process.pid.to_s }
      end

      # pid: a shared server's master, which leads its own process group.
      def keep(pid)
        @kept << pid
      end

      # Stops what is left (kept groups aside, unless kept: false) and
      # returns one line per process stopped, empty when none was left.
      def stop_left_over(kept: true)
        groups = kept ? @kept : []
        left = wait_for_exit(groups)
        return [] if left.empty?

        described = left.map { |pid| "pid #{pid}: #{command_line(pid)}" }
        left.each { |pid| kill(pid) }
        reap(left)
        described
      end

      # Live processes carrying this run's MARK, outside the kept groups.
      def marked(groups = @kept)
        needle = "\0#{MARK}=#{Process.pid}\0"
        Dir.children("/proc").filter_map do |entry|
          next unless entry.match?(/\A\d+\z/) && entry != Process.pid.to_s

          state, _ppid, pgid = File.read("/proc/#{entry}/stat").split(") ", 2).last.split(" ", 4)
          next if state == "Z" || groups.include?(Integer(pgid))

          Integer(entry) if "\0#{File.binread("/proc/#{entry}/environ")}".include?(needle)
        rescue SystemCallError
          nil # gone meanwhile, or another user's
        end
      end

      private

      def after_the_run
        left = stop_left_over(kept: false)
        return if left.empty?

        warn "\nnarwhal test suite: #{left.size} process(es) were still running after the run (killed now):\n  " \
             "#{left.join("\n  ")}"
        exit(false)
      end

      def wait_for_exit(groups)
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + GRACE
        loop do
          left = marked(groups)
          return left if left.empty? || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

          sleep 0.05
        end
      end

      def command_line(pid)
        File.binread("/proc/#{pid}/cmdline").tr("\0", " ").strip
      rescue SystemCallError
        "?"
      end

      def kill(pid)
        Process.kill(:KILL, pid)
      rescue Errno::ESRCH
        nil
      end

      # Our own children would stay zombies: waited for here. Others are
      # their parent's (or init's) to reap.
      def reap(pids)
        pids.each do |pid|
          Timeout.timeout(5) { Process.wait(pid) }
        rescue Errno::ECHILD, Timeout::Error
          nil
        end
      end
    end

    # After each test's teardown: what it left running is stopped, and the
    # test fails saying so.
    module AfterEachTest
      def after_teardown
        super
        left = LeftoverProcesses.stop_left_over
        return if left.empty?

        raise Minitest::Assertion, "left running after the test (killed now):\n  #{left.join("\n  ")}"
      end
    end
  end
end
