# frozen_string_literal: true

require "test_helper"
require "logger"
require "stringio"

# USR1 after logrotate: every file open for appending is reopened at its
# path (a fresh file once the old one was moved away), others are left
# alone; stderr and stdout go to stderr_path and stdout_path.
class SystemLogReopenerTest < Minitest::Test
  LogReopener = Narwhal::System::LogReopener

  def setup
    @dir = Dir.mktmpdir("narwhal-reopen")
    @files = []
  end

  def teardown
    @files.each { |f| f.close unless f.closed? }
    FileUtils.rm_rf(@dir)
  end

  def open_file(name, mode)
    File.open(File.join(@dir, name), mode).tap { |f| @files << f }
  end

  def test_append_files_are_reopened_at_their_path_after_a_rotation
    log = open_file("app.log", "a")
    log.sync = true
    log.write("before\n")
    File.rename(log.path, "#{log.path}.1") # logrotate
    assert_operator LogReopener.reopen, :>=, 1
    log.write("after\n")
    assert_equal "before\n", File.read("#{log.path}.1")
    assert_equal "after\n", File.read(log.path), "a fresh file at the old path"
    assert log.sync, "its sync mode kept"
  end

  def test_files_not_opened_for_appending_are_left_alone
    written = open_file("data.bin", "w")
    appended = open_file("app.log", "a")
    read = open_file("app.log", "r")
    File.rename(written.path, "#{written.path}.moved")
    LogReopener.reopen
    refute File.exist?(written.path), "a file opened for writing is not reopened"
    assert LogReopener.reopenable?(appended)
    refute LogReopener.reopenable?(written)
    refute LogReopener.reopenable?(read)
    refute LogReopener.reopenable?($stderr), "stderr is reopened from stderr_path, not its own path"
    appended.close
    refute LogReopener.reopenable?(appended), "a closed file"
  end

  # stderr_path and stdout_path at start-up (and again on USR1), with the
  # line USR1 logs.
  def test_stderr_and_stdout_go_to_their_paths
    err_path = File.join(@dir, "err.log")
    out_path = File.join(@dir, "out.log")
    config = { stderr_path: err_path, stdout_path: out_path }
    saved_err = $stderr.dup
    saved_out = $stdout.dup
    assert_equal 2, LogReopener.redirect_std(config)
    $stderr.write("to stderr\n")
    $stdout.write("to stdout\n")
    File.rename(err_path, "#{err_path}.1")
    log = StringIO.new
    LogReopener.reopen_logs(config, Logger.new(log), who: "master")
    $stderr.write("after USR1\n")
    $stderr.reopen(saved_err)
    $stdout.reopen(saved_out)
    # USR1 reopens every log file of the process: files other tests left
    # open in deleted directories say so on the new stderr too
    after = File.read(err_path).lines.grep_v(/\Anarwhal: cannot reopen a log file/).join
    assert_equal ["to stderr\n", "after USR1\n", "to stdout\n"], [File.read("#{err_path}.1"), after, File.read(out_path)]
    assert_match(/master reopened \d+ log file\(s\)\n\z/, log.string)
    assert_equal 0, LogReopener.redirect_std({ stderr_path: nil, stdout_path: nil }), "none configured"
  ensure
    $stderr.reopen(saved_err) if saved_err
    $stdout.reopen(saved_out) if saved_out
  end

  # A worker that switches user gets its log files first, so that USR1 can
  # still reopen them (run as root: chown needs it).
  def test_chown_all_gives_the_named_and_open_log_files_to_the_user
    skip "chown to another user needs root (run as uid #{Process.euid})" unless Process.euid.zero?
    named = File.join(@dir, "stderr.log")
    File.write(named, "")
    log = open_file("access.log", "a")
    other = open_file("data.bin", "w")
    LogReopener.chown_all(65_534, 65_534, [named, nil])
    assert_equal [65_534, 65_534], [File.stat(named).uid, File.stat(log.path).uid]
    assert_equal 0, File.stat(other.path).uid, "not a log file"
  end
end
