# frozen_string_literal: true

require "test_helper"
require "logger"
require "stringio"

# The master as hooks and its command line see it, before its loop runs:
# Unicorn's `server` (pid, listen, listeners) and a preloaded app that does
# not load. Its loop is master/main_loop_test.rb's, its signals
# master/commands_test.rb's.
class NarwhalMasterTest < Minitest::Test
  def setup
    @dir = Dir.mktmpdir("narwhal-master")
    @log = StringIO.new
    @config = Narwhal::Configurator.new
    @config.settings[:logger] = Logger.new(@log)
  end

  def teardown
    @master&.listeners&.each(&:close)
    FileUtils.rm_rf(@dir)
  end

  # A port nothing listens on (bound, then let go).
  def free_port
    server = TCPServer.new("127.0.0.1", 0)
    server.addr[1]
  ensure
    server&.close
  end

  def test_a_preloaded_app_that_does_not_load_stops_the_start_before_anything_is_bound
    port = free_port
    pid_path = File.join(@dir, "narwhal.pid")
    @config.settings.update(preload_app: true, pid: pid_path)
    @config.add_listener("127.0.0.1:#{port}")
    broken = -> { raise Narwhal::BootError, "config.ru:3: uninitialized constant Appp" }
    @master = Narwhal::Master.new(@config, broken)
    e = assert_raises(Narwhal::BootError) { @master.start }
    assert_equal "config.ru:3: uninitialized constant Appp", e.message
    assert_empty @master.listeners
    TCPServer.new("127.0.0.1", port).close # the port is still free
    refute File.exist?(pid_path), "no pid file"
  end

  # What Unicorn's hooks call on `server`: no pid file, the configured
  # worker count, and listen binding a listener of its own (the
  # per-worker port trick in after_fork).
  def test_hooks_see_unicorns_server
    @config.settings[:worker_processes] = 3
    @master = Narwhal::Master.new(@config, -> { raise "not built" })
    assert_nil @master.pid
    assert_equal 3, @master.worker_processes
    assert_same @config, @master.config
    refute @master.draining?
    listener = @master.listen(File.join(@dir, "hook.sock"))
    assert_equal [listener], @master.listeners
    assert File.socket?(File.join(@dir, "hook.sock"))
    UNIXSocket.new(File.join(@dir, "hook.sock")).close # it accepts connections
    assert_includes @log.string, "listening on"
  end
end
