# frozen_string_literal: true

require "test_helper"
require "etc"
require "logger"
require "stringio"

# The config DSL: every directive's valid and invalid forms, Unicorn's
# defaults and hook arities, and "FILE:LINE: message" errors.
class ConfiguratorTest < Minitest::Test
  C = Narwhal::Configurator

  # What hooks see as `server` (the master implements the real one).
  FakeServer = Struct.new(:config, :pid, :logger, :worker_processes, :listens) do
    def listen(address, options = {})
      listens << [address, options]
    end
  end
  FakeWorker = Struct.new(:nr)

  # Records [level, message] pairs.
  class RecordingLogger
    attr_reader :lines

    def initialize
      @lines = []
    end

    %i[debug info warn error fatal].each do |level|
      define_method(level) { |msg = nil| @lines << [level, msg] }
    end
  end

  def setup
    @dir = Dir.mktmpdir("nw-config")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def write_config(text, name: "narwhal.rb")
    path = File.join(@dir, name)
    File.write(path, text)
    path
  end

  def load_config(text)
    C.new(file: write_config(text))
  end

  # Asserts that text fails on line `line` with a message matching pattern.
  def assert_config_error(text, line, pattern)
    path = write_config(text)
    e = assert_raises(Narwhal::ConfigError, text) { C.new(file: path) }
    assert_match(/\A#{Regexp.escape(path)}:#{line}: /, e.message, text)
    assert_match(pattern, e.message, text)
    e.message
  end

  def exit_status(code)
    Process.wait2(Process.spawn(RbConfig.ruby, "-e", "exit #{code}"))[1]
  end

  # --- defaults ---

  def test_defaults
    c = C.new
    {
      worker_processes: 1, timeout: 60, preload_app: false, pid: nil, stderr_path: nil, stdout_path: nil,
      working_directory: nil, user: nil, logger: nil, rewindable_input: true, check_client_connection: false,
      default_middleware: true, worker_exec: false, early_hints: false, client_body_buffer_size: 112 * 1024,
      client_max_body_size: 1024**3, max_request_line: 16 * 1024, max_header_size: 112 * 1024,
      max_header_fields: 100, keepalive_timeout: 5, keepalive_requests: 1000, client_timeout: 30,
      write_timeout: 30
    }.each { |key, value| value.nil? ? assert_nil(c[key], key) : assert_equal(value, c[key], key) }
    assert_equal [["127.0.0.1:8080", {}]], c.listeners
    assert_equal [], c[:listeners]
    assert_same c.settings, c.settings
    assert_raises(KeyError) { c[:no_such_setting] }
    assert_kind_of Logger, c.logger
  end

  def test_default_hooks_take_unicorns_arguments
    c = C.new
    { before_fork: 2, after_fork: 2, after_worker_ready: 2, after_worker_exit: 3, before_exec: 1 }.each do |hook, arity|
      assert_kind_of Proc, c[hook]
      assert_equal arity, c[hook].arity, hook
    end
    server = FakeServer.new(c, nil, RecordingLogger.new, 1, [])
    assert_nil c[:before_fork].call(server, FakeWorker.new(0))
    assert_nil c[:before_exec].call(server)
    assert_empty server.logger.lines
  end

  def test_default_after_worker_exit_logs_like_unicorn
    logger = RecordingLogger.new
    server = FakeServer.new(C.new, nil, logger, 1, [])
    hook = C.new[:after_worker_exit]
    ok = exit_status(0)
    failed = exit_status(3)
    hook.call(server, FakeWorker.new(2), ok)
    hook.call(server, FakeWorker.new(1), failed)
    hook.call(server, Object.new, failed) # no #nr: Unicorn logs "unknown"
    assert_equal [[:info, "reaped #{ok.inspect} worker=2"], [:error, "reaped #{failed.inspect} worker=1"],
                  [:error, "reaped #{failed.inspect} worker=unknown"]], logger.lines
  end

  # --- integers, numbers, booleans ---

  def test_worker_processes
    assert_equal 4, load_config("worker_processes 4\n")[:worker_processes]
    [0, -1, "4", 1.5, nil, 5000].each do |bad|
      assert_config_error("\nworker_processes #{bad.inspect}\n", 2, /worker_processes expects an Integer 1\.\.4096, got #{Regexp.escape(bad.inspect)}/)
    end
  end

  def test_timeout
    assert_equal 30, load_config("timeout 30\n")[:timeout]
    assert_equal 2.5, load_config("timeout 2.5\n")[:timeout]
    assert_equal Rational(1, 2), load_config("timeout 1/2r\n")[:timeout]
    assert_equal C::MAX_TIMEOUT, load_config("timeout 10**12\n")[:timeout], "Unicorn's 30-day cap"
    assert_equal C::MAX_TIMEOUT, load_config("timeout Float::INFINITY\n")[:timeout]
    ["0", "-1", "'30'", "nil", "Float::NAN", "Complex(1, 1)"].each do |bad|
      assert_config_error("timeout #{bad}\n", 1, /timeout expects a number > 0/)
    end
  end

  def test_boolean_directives
    %i[preload_app rewindable_input check_client_connection default_middleware worker_exec early_hints].each do |name|
      assert_equal true, load_config("#{name} true\n")[name]
      assert_equal false, load_config("#{name} false\n")[name]
      { "'yes'" => '"yes"', "nil" => "nil", "1" => "1" }.each do |bad, shown|
        assert_config_error("\n\n#{name} #{bad}\n", 3, /#{name} expects true or false, got #{shown}\z/)
      end
    end
  end

  def test_size_and_count_limits
    {
      client_body_buffer_size: 0, client_max_body_size: 1, max_request_line: 64, max_header_size: 256,
      max_header_fields: 1, keepalive_requests: 1
    }.each do |name, min|
      assert_equal min, load_config("#{name} #{min}\n")[name]
      assert_equal min + 10, load_config("#{name} #{min + 10}\n")[name]
      [min - 1, "'#{min + 1}'", (min + 1.5)].each do |bad|
        assert_config_error("#{name} #{bad}\n", 1, /#{name} expects an Integer >= #{min}/)
      end
    end
    assert_nil load_config("client_max_body_size nil\n")[:client_max_body_size]
  end

  def test_timeouts_in_seconds
    assert_equal 0, load_config("keepalive_timeout 0\n")[:keepalive_timeout]
    assert_equal 2.5, load_config("keepalive_timeout 2.5\n")[:keepalive_timeout]
    assert_config_error("keepalive_timeout -1\n", 1, /keepalive_timeout expects a number >= 0/)
    assert_config_error("keepalive_timeout 'soon'\n", 1, /keepalive_timeout expects a number/)
    %i[client_timeout write_timeout].each do |name|
      assert_equal 0.5, load_config("#{name} 0.5\n")[name]
      assert_config_error("#{name} 0\n", 1, /#{name} expects a number > 0, got 0/)
      assert_config_error("#{name} nil\n", 1, /#{name} expects a number > 0/)
    end
  end

  # --- hooks ---

  def test_hooks_store_blocks_and_procs
    c = load_config(<<~RUBY)
      before_fork { |server, worker| server.listen("bf", nr: worker.nr) }
      after_fork do |server, worker|
        server.listen("af", pid: server.config[:pid], own: server.pid)
      end
      after_worker_ready ->(server, worker) { server.listen("awr", nr: worker.nr) }
      after_worker_exit proc { |server, worker, status| server.listen("awe", ok: status.success?) }
      before_exec { |server| server.listen("be", n: server.worker_processes) }
      pid "hooks.pid"
    RUBY
    server = FakeServer.new(c, "/run/x.pid.oldbin", RecordingLogger.new, 3, [])
    worker = FakeWorker.new(1)
    c[:before_fork].call(server, worker)
    c[:after_fork].call(server, worker)
    c[:after_worker_ready].call(server, worker)
    c[:after_worker_exit].call(server, worker, exit_status(0))
    c[:before_exec].call(server)
    assert_equal [["bf", { nr: 1 }], ["af", { pid: File.join(Dir.pwd, "hooks.pid"), own: "/run/x.pid.oldbin" }],
                  ["awr", { nr: 1 }], ["awe", { ok: true }], ["be", { n: 3 }]], server.listens
  end

  def test_hook_arity_is_checked_like_unicorn
    assert_config_error("\nbefore_fork { |server| }\n", 2, /before_fork has invalid arity 1 \(needs 2: \|server, worker\|\)/)
    assert_config_error("after_fork { }\n", 1, /after_fork has invalid arity 0/)
    assert_config_error("after_worker_ready { |*args| }\n", 1, /after_worker_ready has invalid arity -1/)
    assert_config_error("after_worker_exit { |server, worker| }\n", 1,
                        /after_worker_exit has invalid arity 2 \(needs 3: \|server, worker, status\|\)/)
    assert_config_error("before_exec { |server, worker| }\n", 1, /before_exec has invalid arity 2 \(needs 1: \|server\|\)/)
    assert_config_error("before_exec ->() {}\n", 1, /before_exec has invalid arity 0/)
  end

  def test_hook_argument_errors
    assert_config_error("before_fork 42\n", 1, /before_fork expects a block or a Proc, got 42/)
    assert_config_error("before_fork :sym\n", 1, /before_fork expects a block or a Proc/)
    assert_config_error("before_fork(->(s, w) {}) { |s, w| }\n", 1, /before_fork takes a block or a Proc, not both/)
    assert_config_error("before_fork 1, 2\n", 1, /before_fork takes a block or one Proc/)
  end

  def test_nil_hook_restores_the_default
    c = load_config("after_fork { |s, w| raise 'custom' }\nafter_fork nil\n")
    assert_same C::HOOK_DEFAULTS[:after_fork], c[:after_fork]
  end

  # --- paths ---

  def test_paths_are_expanded_relative_to_the_current_directory
    Dir.chdir(@dir) do
      c = load_config("pid 'narwhal.pid'\nstderr_path './err.log'\nstdout_path \"\#{Dir.pwd}/out.log\"\n")
      dir = Dir.pwd
      assert_equal File.join(dir, "narwhal.pid"), c[:pid]
      assert_equal File.join(dir, "err.log"), c[:stderr_path]
      assert_equal File.join(dir, "out.log"), c[:stdout_path]
    end
  end

  def test_paths_are_relative_to_working_directory_wherever_it_is_set
    app = File.join(@dir, "app")
    FileUtils.mkdir_p(File.join(app, "log"))
    c = load_config(<<~RUBY)
      pid "app.pid"
      working_directory #{app.inspect}
      stderr_path "log/err.log"
      stdout_path nil
    RUBY
    assert_equal app, c[:working_directory]
    assert_equal File.join(app, "app.pid"), c[:pid], "as with Unicorn, which changes directory at once"
    assert_equal File.join(app, "log/err.log"), c[:stderr_path]
    assert_nil c[:stdout_path]
  end

  def test_path_errors
    %i[pid stderr_path stdout_path].each do |name|
      assert_config_error("#{name} 42\n", 1, /#{name} expects a path String or nil, got 42/)
      assert_config_error("#{name} ''\n", 1, /#{name} expects a path/)
      assert_config_error("\n#{name} '/nonexistent/dir/x'\n", 2,
                          %r{#{name} /nonexistent/dir/x: directory /nonexistent/dir is not writable or does not exist})
    end
  end

  def test_a_path_directory_created_later_in_the_file_is_fine
    c = load_config("pid 'later/x.pid'\nworking_directory #{@dir.inspect}\nDir.mkdir('#{@dir}/later')\n")
    assert_equal File.join(@dir, "later/x.pid"), c[:pid]
  end

  def test_working_directory
    sub = File.join(@dir, "sub")
    Dir.mkdir(sub)
    assert_equal sub, load_config("working_directory #{sub.inspect}\n")[:working_directory]
    Dir.chdir(@dir) { assert_equal sub, load_config("working_directory 'sub'\n")[:working_directory] }
    assert_equal sub, load_config("working_directory #{@dir.inspect}\nworking_directory 'sub'\n")[:working_directory]
    assert_config_error("working_directory '/nonexistent/narwhal'\n", 1, %r{working_directory /nonexistent/narwhal is not a directory})
    assert_config_error("\nworking_directory #{write_config('', name: 'plain').inspect}\n", 2, /is not a directory/)
    assert_config_error("working_directory 7\n", 1, /working_directory expects a path String, got 7/)
  end

  # --- user, logger ---

  def test_user
    me = Etc.getpwuid(Process.uid).name
    group = Etc.getgrgid(Process.gid).name
    assert_equal [me, nil], load_config("user #{me.inspect}\n")[:user]
    assert_equal [me, group], load_config("user #{me.inspect}, #{group.inspect}\n")[:user]
    assert_config_error("user 'no-such-user-nw'\n", 1, /user "no-such-user-nw" does not exist/)
    assert_config_error("user #{me.inspect}, 'no-such-group-nw'\n", 1, /group "no-such-group-nw" does not exist/)
    assert_config_error("user 0\n", 1, /user expects a user name String, got 0/)
    assert_config_error("user #{me.inspect}, 0\n", 1, /user expects a group name String or nil, got 0/)
  end

  def test_logger
    c = load_config("logger Logger.new(StringIO.new)\n")
    assert_kind_of Logger, c[:logger]
    assert_same c[:logger], c.logger
    assert_config_error("logger Object.new\n", 1, /logger must respond to debug/)
    assert_config_error("logger $stderr\n", 1, /logger must respond to debug/)
  end

  # --- listen ---

  def test_listen_canonicalises_addresses_like_unicorn
    c = load_config(<<~RUBY)
      listen "127.0.0.1:9000", backlog: 64
      listen ":9001"
      listen 9002
      listen "*:9003"
      listen "9004"
      listen "[::1]:9005"
      listen "10.0.0.1"
      listen "/tmp/x.sock"
      listen "unix:rel.sock"
    RUBY
    assert_equal [["127.0.0.1:9000", { backlog: 64 }], ["0.0.0.0:9001", {}], ["0.0.0.0:9002", {}],
                  ["0.0.0.0:9003", {}], ["0.0.0.0:9004", {}], ["[::1]:9005", {}], ["10.0.0.1:80", {}],
                  ["/tmp/x.sock", {}], [File.join(Dir.pwd, "rel.sock"), {}]], c.listeners
    assert_equal c.listeners, c[:listeners]
  end

  def test_relative_unix_sockets_follow_working_directory
    c = load_config("working_directory #{@dir.inspect}\nlisten 'unix:tmp.sock'\nlisten './b.sock'\n")
    assert_equal [[File.join(@dir, "tmp.sock"), {}], [File.join(@dir, "b.sock"), {}]], c.listeners
  end

  def test_repeated_listen_merges_options_like_unicorn
    c = load_config(<<~RUBY)
      listen 8080, backlog: 64, tcp_nopush: true
      listen "/tmp/x.sock"
      listen "0.0.0.0:8080", backlog: 128, rcvbuf: 4096
    RUBY
    assert_equal [["0.0.0.0:8080", { backlog: 128, tcp_nopush: true, rcvbuf: 4096 }], ["/tmp/x.sock", {}]], c.listeners
  end

  def test_listen_accepts_every_unicorn_option
    all = { backlog: 64, rcvbuf: 8192, sndbuf: 8192, tcp_nodelay: false, tcp_nopush: true, ipv6only: true,
            reuseport: true, umask: 0o007, tries: -1, delay: 5, tcp_defer_accept: 1, accept_filter: "httpready" }
    c = load_config("listen 8080, #{all.inspect}\n")
    assert_equal [["0.0.0.0:8080", all]], c.listeners
  end

  def test_listen_option_errors_name_the_option_and_line
    {
      "backlog: 0" => /listen 8080: backlog expects an Integer > 0, got 0/,
      "backlog: '64'" => /backlog expects an Integer > 0, got "64"/,
      "rcvbuf: -1" => /rcvbuf expects an Integer > 0/,
      "sndbuf: 'big'" => /sndbuf expects an Integer > 0/,
      "tcp_nodelay: 'yes'" => /tcp_nodelay expects true or false/,
      "tcp_nopush: 1" => /tcp_nopush expects true or false/,
      "ipv6only: 'no'" => /ipv6only expects true or false/,
      "reuseport: 1" => /reuseport expects true or false/,
      "umask: 0o1777" => /umask expects an Integer 0\.\.0777/,
      "tries: 'forever'" => /tries expects an Integer/,
      "delay: -0.5" => /delay expects a number of seconds >= 0/,
      "tcp_defer_accept: 'on'" => /tcp_defer_accept expects/,
      "tcp_nopushh: true" => /unsupported listen option\(s\) :tcp_nopushh/
    }.each do |options, pattern|
      assert_config_error("\nlisten 8080, #{options}\n", 2, pattern)
    end
  end

  def test_listen_address_errors
    assert_config_error("listen 'nope:'\n", 1, /listen "nope:": invalid listen address "nope:"/)
    assert_config_error("listen '1.2.3.4:70000'\n", 1, /port out of range/)
    assert_config_error("listen 'unix:'\n", 1, /empty socket path/)
    assert_config_error("listen :sym\n", 1, /listen expects an address String or a port Integer, got :sym/)
    assert_config_error("listen nil\n", 1, /listen expects an address String/)
    assert_config_error("listen 8080, 64\n", 1, /listen options must be a Hash, got 64/)
    assert_config_error("listen 'no-such-host.invalid:80'\n", 1, /cannot resolve "no-such-host.invalid"/)
  end

  def test_add_listener_from_the_command_line
    c = C.new
    assert_equal "0.0.0.0:3000", c.add_listener(":3000")
    assert_equal "0.0.0.0:3000", c.add_listener(3000, backlog: 5)
    assert_equal [["0.0.0.0:3000", { backlog: 5 }]], c.listeners
    assert_raises(ArgumentError) { c.add_listener("nope:") }
    assert_raises(ArgumentError) { c.add_listener(":1", backlog: 0) }
  end

  def test_expand_addr
    assert_equal "0.0.0.0:8080", C.expand_addr(":8080")
    assert_equal "0.0.0.0:8080", C.expand_addr(8080)
    assert_equal "[::1]:8080", C.expand_addr("[::1]:8080")
    assert_equal "/srv/a.sock", C.expand_addr("unix:a.sock", "/srv")
    assert_equal Narwhal::Listener.expand_addr("localhost:1"), C.expand_addr("localhost:1")
  end

  # --- errors and reloading ---

  def test_unknown_directive_names_file_and_line
    assert_config_error("keepalive_timeout 1\n\nworker_processez 4\n", 3, /unknown directive :worker_processez/)
    assert_config_error("if true\n  frobnicate\nend\n", 2, /unknown directive :frobnicate/)
  end

  def test_wrong_type_names_file_and_line
    assert_config_error("\nclient_max_body_size \"10m\"\n", 2, /client_max_body_size expects an Integer >= 1, got "10m"/)
  end

  def test_wrong_argument_count_names_the_directive
    assert_config_error("\nworker_processes\n", 2, /worker_processes: wrong number of arguments \(given 0, expected 1\)/)
    assert_config_error("timeout 1, 2\n", 1, /timeout: wrong number of arguments/)
  end

  def test_directive_called_from_a_helper_method_reports_the_calling_line
    assert_config_error("def workers(n)\n  worker_processes n\nend\nworkers 0\n", 2, /worker_processes expects/)
  end

  def test_ruby_error_names_file_and_line
    assert_config_error("x = 1\nraise 'boom'\n", 2, /boom \(RuntimeError\)/)
    assert_config_error("\n\nFile.read('/nonexistent/secret')\n", 3, /No such file or directory.*Errno::ENOENT/)
  end

  def test_syntax_error_names_file
    path = write_config("listen '127.0.0.1:1'\nif\n")
    e = assert_raises(Narwhal::ConfigError) { C.new(file: path) }
    assert_match(/#{Regexp.escape(path)}:\d+: .*syntax error/m, e.message)
  end

  def test_missing_file
    e = assert_raises(Narwhal::ConfigError) { C.new(file: "/nonexistent/narwhal.rb") }
    assert_match(/cannot read config file/, e.message)
  end

  def test_file_is_kept_absolute
    write_config("worker_processes 2\n")
    Dir.chdir(@dir) { assert_equal File.join(Dir.pwd, "narwhal.rb"), C.new(file: "narwhal.rb").file }
  end

  def test_reload_reads_the_file_again_and_a_broken_file_changes_nothing
    path = write_config("worker_processes 2\nlisten 9000\n")
    c = C.new(file: path)
    File.write(path, "worker_processes 3\n")
    fresh = c.reload
    assert_equal 3, fresh[:worker_processes]
    assert_equal [["127.0.0.1:8080", {}]], fresh.listeners
    File.write(path, "worker_processes 0\n")
    assert_raises(Narwhal::ConfigError) { c.reload }
    assert_equal 2, c[:worker_processes]
    assert_equal [["0.0.0.0:9000", {}]], c.listeners
    assert_equal 2, C.new(file: write_config("worker_processes 2\n")).reload[:worker_processes]
  end

  # --- examples/unicorn_style.conf.rb ---

  EXAMPLE = File.expand_path("../../examples/unicorn_style.conf.rb", __dir__)

  def with_env(vars)
    saved = vars.keys.to_h { |k| [k, ENV.fetch(k, nil)] }
    vars.each { |k, v| ENV[k] = v }
    yield
  ensure
    saved.each { |k, v| ENV[k] = v }
  end

  # A stand-in for ActiveRecord::Base, recording what the hooks call.
  module FakeActiveRecord
    class Base
      class << self
        attr_accessor :calls

        def connection = self
        def disconnect! = (calls << :disconnect!)
        def establish_connection = (calls << :establish_connection)
      end
    end
  end

  def load_example
    shared = File.join(@dir, "shared")
    %w[sockets pids log].each { |d| FileUtils.mkdir_p(File.join(shared, d)) }
    with_env("APP_ROOT" => @dir, "APP_SHARED" => shared) { [C.new(file: EXAMPLE), shared] }
  end

  def test_unicorn_style_example_settings
    c, shared = load_example
    assert_equal 4, c[:worker_processes]
    assert_equal @dir, c[:working_directory]
    assert_equal [["#{shared}/sockets/unicorn.sock", { backlog: 64 }], ["0.0.0.0:8080", { tcp_nopush: true }]],
                 c.listeners
    assert_equal 30, c[:timeout]
    assert_equal "#{shared}/pids/unicorn.pid", c[:pid]
    assert_equal "#{shared}/log/unicorn.stderr.log", c[:stderr_path]
    assert_equal "#{shared}/log/unicorn.stdout.log", c[:stdout_path]
    assert_equal true, c[:preload_app]
    assert_equal false, c[:check_client_connection]
    refute_same C::HOOK_DEFAULTS[:before_fork], c[:before_fork]
    refute_same C::HOOK_DEFAULTS[:after_fork], c[:after_fork]
    assert_same C::HOOK_DEFAULTS[:after_worker_exit], c[:after_worker_exit]
  end

  def test_unicorn_style_example_before_fork_retires_the_old_master
    c, = load_example
    old_master = Process.spawn(RbConfig.ruby, "-e", "sleep 30")
    File.write("#{c[:pid]}.oldbin", old_master.to_s)
    # the old master forking during its own re-exec must not signal itself
    c[:before_fork].call(FakeServer.new(c, "#{c[:pid]}.oldbin", RecordingLogger.new, 4, []), FakeWorker.new(1))
    assert_nil Process.wait(old_master, Process::WNOHANG)
    # the new master does
    c[:before_fork].call(FakeServer.new(c, c[:pid], RecordingLogger.new, 4, []), FakeWorker.new(1))
    _, status = Process.wait2(old_master)
    old_master = nil
    assert_equal Signal.list["QUIT"], status.termsig
    # once the old master and its pid file are gone, nothing fails
    File.unlink("#{c[:pid]}.oldbin")
    c[:before_fork].call(FakeServer.new(c, c[:pid], RecordingLogger.new, 4, []), FakeWorker.new(2))
  ensure
    if old_master
      Process.kill(:KILL, old_master)
      Process.wait(old_master)
    end
  end

  def test_unicorn_style_example_after_fork_reconnects_and_listens_per_worker
    c, = load_example
    Object.const_set(:ActiveRecord, FakeActiveRecord)
    FakeActiveRecord::Base.calls = []
    server = FakeServer.new(c, c[:pid], RecordingLogger.new, 4, [])
    c[:after_fork].call(server, FakeWorker.new(2))
    assert_equal [["127.0.0.1:9295", { tries: -1, delay: 5 }]], server.listens
    assert_equal [:establish_connection], FakeActiveRecord::Base.calls
    c[:before_fork].call(server, FakeWorker.new(1))
    assert_equal %i[establish_connection disconnect!], FakeActiveRecord::Base.calls
  ensure
    Object.__send__(:remove_const, :ActiveRecord) if Object.const_defined?(:ActiveRecord, false)
  end
end
