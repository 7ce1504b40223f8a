# frozen_string_literal: true

require "test_helper"

# The master's pid file with Unicorn's rules, on real files and processes:
# written whole, refused over a live process's, moved aside for USR2,
# removed only by the process it names.
class MasterPidFileTest < Minitest::Test
  PidFile = Narwhal::Master::PidFile

  def setup
    @dir = Dir.mktmpdir("narwhal-pid")
    @path = File.join(@dir, "narwhal.pid")
  end

  def teardown
    if @child
      Process.kill(:KILL, @child)
      Process.wait(@child)
    end
    FileUtils.rm_rf(@dir)
  end

  # The pid of a process that existed and is gone (reaped).
  def dead_pid
    pid = Process.spawn("true")
    Process.wait(pid)
    pid
  end

  def test_writes_the_pid_and_leaves_no_temporary_file
    PidFile.new(@path).write
    assert_equal "#{Process.pid}\n", File.read(@path)
    assert_equal ["narwhal.pid"], Dir.children(@dir)
    PidFile.new(@path).write # its own pid again: fine
    assert_equal Process.pid, PidFile.live_pid(@path)
  end

  def test_a_live_process_file_is_refused_a_stale_one_replaced
    @child = Process.spawn("sleep", "30")
    File.write(@path, "#{@child}\n")
    e = assert_raises(ArgumentError) { PidFile.new(@path).write }
    assert_equal "pid file #{@path} names running process #{@child}", e.message
    assert_equal "#{@child}\n", File.read(@path), "left as it was"
    File.write(@path, "#{dead_pid}\n")
    PidFile.new(@path).write
    assert_equal "#{Process.pid}\n", File.read(@path)
  end

  def test_a_pid_file_in_a_missing_directory_names_the_directory
    path = File.join(@dir, "run/narwhal.pid")
    e = assert_raises(ArgumentError) { PidFile.new(path).write }
    assert_equal "cannot write pid file #{path}: directory #{@dir}/run does not exist", e.message
  end

  def test_live_pid_is_nil_for_what_names_no_live_process
    assert_nil PidFile.live_pid(@path), "missing"
    File.write(@path, "garbage\n")
    assert_nil PidFile.live_pid(@path)
    File.write(@path, "#{dead_pid}\n")
    assert_nil PidFile.live_pid(@path)
    assert_nil PidFile.live_pid(@dir), "a directory"
    File.write(@path, "#{Process.ppid}\n")
    assert_equal Process.ppid, PidFile.live_pid(@path)
  end

  # USR2: the old master's file moves aside so that the new one can write
  # PATH; with no file there is nothing to move.
  def test_rename_to_oldbin_moves_the_file_aside
    PidFile.new(@path).write
    old = PidFile.new(@path).rename_to_oldbin
    assert_equal "#{@path}.oldbin", old.path
    assert_equal "#{Process.pid}\n", File.read(old.path)
    refute File.exist?(@path)
    File.unlink(old.path)
    assert_equal "#{@path}.oldbin", PidFile.new(@path).rename_to_oldbin.path
    assert_empty Dir.children(@dir)
  end

  # A new master that took PATH over keeps its file when the old one exits.
  def test_unlink_removes_only_a_file_that_names_this_process
    File.write(@path, "#{Process.ppid}\n")
    PidFile.new(@path).unlink
    assert File.exist?(@path)
    File.write(@path, "#{Process.pid}\n")
    PidFile.new(@path).unlink
    refute File.exist?(@path)
    PidFile.new(@path).unlink # gone already: nothing raised
  end
end
