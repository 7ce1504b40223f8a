# frozen_string_literal: true

require "test_helper"
require_relative "../../support/config_files"

# The directives that name files (access_log, pid, stderr_path, stdout_path):
# resolved against working_directory, and the access log's checks.
class ConfiguratorPathsTest < Minitest::Test
  include Narwhal::ConfigFiles

  def test_access_log_is_off_by_default_and_takes_a_path_and_a_format
    assert_nil Narwhal::Configurator.new[:access_log]
    path = write_config("access_log 'log/access.log'\naccess_log 'a.log', format: :json\n")
    File.write(path, "access_log 'a.log'\n")
    assert_equal [File.expand_path("a.log"), :combined], Narwhal::Configurator.new(file: path)[:access_log]
    File.write(path, "working_directory #{@dir.inspect}\naccess_log 'a.log', format: 'json'\naccess_log nil\n" \
                     "access_log 'b.log', format: :json\n")
    assert_equal [File.join(@dir, "b.log"), :json], Narwhal::Configurator.new(file: path)[:access_log]
  end

  def test_access_log_errors_name_file_and_line
    assert_equal "2: access_log format: must be :combined or :json, got :common",
                 config_error("\naccess_log 'a.log', format: :common\n")
    assert_equal "1: access_log's one option is format: :combined or :json, got {:fromat=>:json}",
                 config_error("access_log 'a.log', fromat: :json\n")
    assert_equal "1: access_log expects a path String (or nil: off), got :stdout", config_error("access_log :stdout\n")
    assert_equal "1: access_log /nonexistent/dir/a.log: its directory /nonexistent/dir does not exist",
                 config_error("access_log '/nonexistent/dir/a.log'\n")
    assert_equal "1: access_log #{@dir}: is a directory", config_error("access_log #{@dir.inspect}\n")
  end

  # Relative paths mean the directory the server runs in, wherever the
  # file sets working_directory; without one, the start directory.
  def test_relative_paths_are_resolved_against_working_directory_given_later
    path = write_config("")
    app = File.join(@dir, "app")
    FileUtils.mkdir_p(File.join(app, "log"))
    File.write(path, <<~RUBY)
      access_log "log/access.log", format: :json
      pid "narwhal.pid"
      stderr_path "log/err.log"
      stdout_path "log/out.log"
      working_directory #{app.inspect}
    RUBY
    c = Narwhal::Configurator.new(file: path)
    assert_equal [File.join(app, "log/access.log"), :json], c[:access_log]
    assert_equal [File.join(app, "narwhal.pid"), File.join(app, "log/err.log"), File.join(app, "log/out.log")],
                 c.settings.values_at(:pid, :stderr_path, :stdout_path)
    File.write(path, "pid 'narwhal.pid'\naccess_log '/abs/../tmp/a.log'\n")
    c = Narwhal::Configurator.new(file: path)
    assert_equal [File.expand_path("narwhal.pid"), "/tmp/a.log"], [c[:pid], c[:access_log].first]
  end

  def test_an_access_log_directory_is_checked_in_working_directory_at_its_own_line
    app = Dir.mktmpdir
    assert_equal "2: access_log #{app}/nolog/a.log: its directory #{app}/nolog does not exist",
                 config_error("listen ':0'\naccess_log 'nolog/a.log'\nworking_directory #{app.inspect}\n")
  ensure
    FileUtils.rm_rf(app)
  end

  def test_paths_of_the_wrong_type_and_a_missing_working_directory_name_the_line
    assert_equal "2: pid expects a path String or nil", config_error("\npid :here\n")
    assert_equal "1: stderr_path expects a path String or nil", config_error("stderr_path 2\n")
    assert_equal "1: working_directory /nonexistent/app is not a directory",
                 config_error("working_directory '/nonexistent/app'\n")
  end

  # USR2 starts the new master in working_directory as the file wrote it,
  # so that a symlinked release path (/app/current) stays one.
  def test_working_directory_is_where_usr2_starts_the_new_master
    saved = Narwhal::START_CTX[:cwd]
    path = write_config("")
    link = File.join(@dir, "current")
    File.symlink(@dir, link)
    File.write(path, "working_directory #{link.inspect}\n")
    assert_equal File.realpath(@dir), File.realpath(Narwhal::Configurator.new(file: path)[:working_directory])
    assert_equal link, Narwhal::START_CTX[:cwd]
  ensure
    Narwhal::START_CTX[:cwd] = saved
  end
end
