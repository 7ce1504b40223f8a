# frozen_string_literal: true

require "test_helper"
require "etc"

# A worker as the master and hooks see it (Unicorn's Worker): its number,
# the place it fills, how it compares, and switching its user in after_fork.
class WorkerTest < Minitest::Test
  def test_a_new_worker_fills_its_own_place
    worker = Narwhal::Worker.new(3)
    assert_equal [3, 3, 3], [worker.nr, worker.number, worker.place]
    assert_nil worker.pid
    refute worker.quitting || worker.killed || worker.recycling || worker.ready
    refute worker.switched?
    assert_equal 1, worker.threads
  end

  # A recycled worker's replacement has a spare number of its own and holds
  # its predecessor's place.
  def test_a_stand_in_holds_its_predecessors_place
    worker = Narwhal::Worker.new(7)
    worker.stand_in_for = 2
    assert_equal [7, 2], [worker.nr, worker.place]
  end

  # Hooks compare workers with numbers, as with Unicorn (`worker == 0`).
  def test_workers_compare_by_number
    assert_equal Narwhal::Worker.new(1), Narwhal::Worker.new(1)
    refute_equal Narwhal::Worker.new(1), Narwhal::Worker.new(2)
    assert Narwhal::Worker.new(0) == 0 # rubocop:disable Style/NumericPredicate
    refute Narwhal::Worker.new(0) == 1
    refute Narwhal::Worker.new(0) == "0"
  end

  # In a forked child, as in after_fork: the process takes the user's uid
  # and gid, and the log files (named, and open for appending) become the
  # user's so that USR1 can still reopen them.
  def test_user_switches_the_process_and_gives_it_the_log_files
    skip "switching user needs root (run as uid #{Process.euid})" unless Process.euid.zero?
    nobody = Etc.getpwnam("nobody")
    Dir.mktmpdir("narwhal-worker") do |dir|
      named = File.join(dir, "stderr.log")
      open_log = File.join(dir, "access.log")
      File.write(named, "")
      File.chmod(0o777, dir)
      reader, writer = IO.pipe
      pid = fork do
        reader.close
        log = File.open(open_log, "a")
        worker = Narwhal::Worker.new(0)
        worker.user("nobody", log_paths: [named])
        writer.puts([Process.euid, Process.uid, Process.egid, worker.switched?, log.path].join(" "))
        exit!(0)
      end
      writer.close
      report = reader.read.split
      Process.wait(pid)
      assert_equal [nobody.uid.to_s, nobody.uid.to_s, nobody.gid.to_s, "true", open_log], report
      assert_equal [nobody.uid, nobody.uid], [File.stat(named).uid, File.stat(open_log).uid]
    end
  end

  def test_an_unknown_user_is_an_argument_error_before_anything_changes
    worker = Narwhal::Worker.new(0)
    assert_raises(ArgumentError) { worker.user("nosuchuser-narwhal") }
    refute worker.switched?
  end
end
