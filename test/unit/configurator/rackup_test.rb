# frozen_string_literal: true

require "test_helper"
require "logger"
require "stringio"

class RackupConfiguratorTest < Minitest::Test
  def setup
    @dir = Dir.mktmpdir
    FileUtils.mkdir_p(File.join(@dir, "config"))
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def find(options = {}, env = {})
    Dir.chdir(@dir) { Narwhal::Configurator::Rackup.find_file(options, env) }
  end

  def test_lookup_order
    assert_nil find
    File.write(File.join(@dir, "config/narwhal.rb"), "")
    assert_equal [File.join(@dir, "config/narwhal.rb"), "config/narwhal.rb"], find
    assert_equal [File.join(@dir, "env.rb"), "NARWHAL_CONFIG"], find({}, "NARWHAL_CONFIG" => "env.rb")
    assert_equal ["/etc/n.rb", "-O config_file"], find({ config_file: "/etc/n.rb" }, "NARWHAL_CONFIG" => "env.rb")
  end

  def config(text, options)
    file = File.join(@dir, "n.rb")
    File.write(file, text)
    Narwhal::Configurator::Rackup.new(file: file, rackup_options: options).tap(&:apply_command_line_address)
  end

  def test_rackup_address_replaces_the_files_listen_lines
    c = config(%(listen "/tmp/app.sock"\n), Host: "localhost", Port: 9292)
    assert_equal [["localhost:9292", {}]], c.listeners
    assert_equal ["listen /tmp/app.sock of #{@dir}/n.rb replaced by localhost:9292 from the command line"], c.notes
  end

  def test_rails_address_only_when_typed
    c = config(%(listen "/tmp/app.sock"\n), Host: "localhost", Port: 3000, user_supplied_options: [:environment])
    assert_equal [["/tmp/app.sock", {}]], c.listeners
    assert_empty c.notes
    c = config(%(listen "/tmp/app.sock"\n), Host: "::1", Port: 4000, user_supplied_options: [:Port])
    assert_equal [["[::1]:4000", {}]], c.listeners
    c = config("", Host: "0.0.0.0", Port: 3000, user_supplied_options: [])
    assert_equal [["0.0.0.0:3000", {}]], c.listeners
  end

  def test_hup_reload_keeps_the_rackup_wrapping
    c = config("timeout 5\n", pid: File.join(@dir, "rackup.pid"))
    reloaded = c.reload
    assert_instance_of Narwhal::Configurator::Rackup, reloaded
    refute_same Narwhal::Configurator::LOG_EXIT_HOOK, reloaded[:after_worker_exit]
  end

  # USR2 is refused by the master itself (Master.new(reexec: false)): the
  # file's before_exec hook is the file's, before and after HUP.
  def test_the_files_before_exec_hook_is_kept
    c = config("before_exec { |server| server.logger.info('before_exec of the file') }\n", {})
    [c, c.reload].each do |loaded|
      out = StringIO.new
      loaded[:before_exec].call(Struct.new(:logger).new(Logger.new(out)))
      assert_includes out.string, "before_exec of the file"
    end
  end
end
