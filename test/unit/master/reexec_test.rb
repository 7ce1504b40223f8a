# frozen_string_literal: true

require "test_helper"
require "logger"
require "stringio"
require "rbconfig"

# USR2's fork and exec, with START_CTX pointed at a shell that reports
# what the new master would have inherited and then dies.
class ReexecTest < Minitest::Test
  def setup
    @dir = Dir.mktmpdir
    @log = StringIO.new
    @logger = Logger.new(@log)
    @listeners = Narwhal::Listener::Set.new(@logger) # ENV: the exec'd program reads NARWHAL_FD there
    @listeners.open([["127.0.0.1:0", {}]], default: "127.0.0.1:0")
    @pid_file = Narwhal::Master::PidFile.new(File.join(@dir, "narwhal.pid"))
    @pid_file.write
    @saved_ctx = Narwhal::START_CTX.dup
  end

  def teardown
    Narwhal::START_CTX.replace(@saved_ctx)
    Process.setproctitle($PROGRAM_NAME)
    @listeners.close
    FileUtils.rm_rf(@dir)
  end

  def test_the_child_gets_the_listeners_runs_before_exec_and_its_death_is_backed_out
    fd = @listeners.first.io.fileno
    Narwhal::START_CTX.merge!(0 => "/bin/sh", :cwd => @dir,
                              argv: ["-c", 'test -e /proc/$$/fd/$NARWHAL_FD && echo "$NARWHAL_FD open" > fds; exit 5'])
    reexec = Narwhal::Master::Reexec.new(@logger)
    kept = reexec.start(@pid_file, @listeners) { File.write(File.join(@dir, "before_exec"), Process.pid.to_s) }
    assert reexec.running?
    assert_equal "#{@pid_file.path}.oldbin", kept.path
    assert File.exist?(kept.path), "the pid file moved aside"
    assert_includes @log.string, "re-executing: new master pid=#{reexec.pid}"

    _, status = Process.wait2(reexec.pid)
    assert_equal "#{fd} open\n", File.read(File.join(@dir, "fds")), "the exec'd program has the listener"
    assert_equal reexec.pid.to_s, File.read(File.join(@dir, "before_exec"))
    child = reexec.pid
    back = reexec.failed(status, kept)
    assert_equal @pid_file.path, back.path
    assert File.exist?(@pid_file.path)
    refute File.exist?(kept.path)
    refute reexec.running?
    assert_includes @log.string, "re-exec pid=#{child} died (exit 5); old master carries on"
  end

  # The upgrade's channel goes through the exec with its terms; the old
  # master keeps only the read end.
  def test_the_child_gets_the_upgrade_channel
    script = 'require "json"; t = JSON.parse(ENV["NARWHAL_UPGRADE"]); File.write("terms", t["timeout"].to_s); ' \
             'IO.for_fd(t["fd"]).write("serving\n")'
    Narwhal::START_CTX.merge!(0 => RbConfig.ruby, :cwd => @dir, argv: ["-e", script])
    channel = Narwhal::Master::Upgrade::Channel.open({ "timeout" => 30 })
    reexec = Narwhal::Master::Reexec.new(@logger)
    reexec.start(@pid_file, @listeners, channel: channel) {}
    _, status = Process.wait2(reexec.pid)
    assert status.success?
    assert_equal "30", File.read(File.join(@dir, "terms"))
    assert_equal [["serving", ""]], channel.messages
    assert_nil channel.reader, "EOF: the child's end was the only write end left"
  ensure
    channel&.close
  end

  def test_a_second_usr2_while_an_upgrade_is_in_progress_is_ignored
    File.write("#{@pid_file.path}.oldbin", "1\n")
    reexec = Narwhal::Master::Reexec.new(@logger)
    assert_same @pid_file, reexec.start(@pid_file, @listeners) { flunk "before_exec ran" }
    refute reexec.running?
    assert_includes @log.string, "USR2 ignored: #{@pid_file.path}.oldbin exists (another upgrade in progress)"
  end

  # rackup and rails server: nothing forked, the pid file keeps its name.
  def test_unavailable_refuses_with_the_reason
    reexec = Narwhal::Master::Reexec.new(@logger, available: false)
    assert_same @pid_file, reexec.start(@pid_file, @listeners) { flunk "before_exec ran" }
    refute reexec.running?
    assert File.exist?(@pid_file.path)
    assert_includes @log.string, "USR2: re-exec is not available under rackup or rails server " \
                                 "(run `narwhal -c FILE` for upgrades without downtime); carrying on"
  end

  # USR2's fork refused (pids.max, RLIMIT_NPROC) or failing: the pid file
  # gets its name back and the old master carries on.
  def test_a_fork_that_fails_puts_the_pid_file_back
    forker = Object.new
    def forker.fork
      raise Narwhal::Master::ForkRefused, "the kernel refused a new process (resource temporarily unavailable)"
    end
    reexec = Narwhal::Master::Reexec.new(@logger, forker: forker)
    back = reexec.start(@pid_file, @listeners) { flunk "before_exec ran" }
    assert_equal @pid_file.path, back.path
    assert File.exist?(@pid_file.path)
    refute File.exist?("#{@pid_file.path}.oldbin")
    refute reexec.running?
    assert_includes @log.string, "USR2: fork failed: the kernel refused a new process (resource temporarily " \
                                 "unavailable); old master carries on"
  end
end
