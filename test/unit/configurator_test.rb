# frozen_string_literal: true

require "test_helper"

class ConfiguratorTest < Minitest::Test
  def write_config(text)
    @dir = Dir.mktmpdir
    path = File.join(@dir, "narwhal.rb")
    File.write(path, text)
    path
  end

  def teardown
    FileUtils.rm_rf(@dir) if @dir
  end

  def test_defaults
    c = Narwhal::Configurator.new
    assert_equal 112 * 1024, c[:client_body_buffer_size]
    assert_equal 5, c[:keepalive_timeout]
    assert_equal [["127.0.0.1:8080", {}]], c.listeners
  end

  def test_directives_set_values
    c = Narwhal::Configurator.new(file: write_config(<<~RUBY))
      listen "127.0.0.1:9000", backlog: 64
      listen "/tmp/x.sock"
      keepalive_timeout 2.5
      client_max_body_size nil
      early_hints true
    RUBY
    assert_equal [["127.0.0.1:9000", { backlog: 64 }], ["/tmp/x.sock", {}]], c.listeners
    assert_equal 2.5, c[:keepalive_timeout]
    assert_nil c[:client_max_body_size]
    assert c[:early_hints]
  end

  def test_unknown_directive_names_file_and_line
    path = write_config("keepalive_timeout 1\n\nworker_processez 4\n")
    e = assert_raises(Narwhal::ConfigError) { Narwhal::Configurator.new(file: path) }
    assert_match(/#{Regexp.escape(path)}:3: unknown directive :worker_processez/, e.message)
  end

  def test_wrong_type_names_file_and_line
    path = write_config("\nclient_max_body_size \"10m\"\n")
    e = assert_raises(Narwhal::ConfigError) { Narwhal::Configurator.new(file: path) }
    assert_match(/#{Regexp.escape(path)}:2: client_max_body_size expects an Integer >= 1, got "10m"/, e.message)
  end

  def test_ruby_error_names_file_and_line
    path = write_config("x = 1\nraise 'boom'\n")
    e = assert_raises(Narwhal::ConfigError) { Narwhal::Configurator.new(file: path) }
    assert_match(/narwhal.rb:2: boom/, e.message)
  end

  def test_syntax_error_names_file
    path = write_config("listen '127.0.0.1:1'\nif\n")
    e = assert_raises(Narwhal::ConfigError) { Narwhal::Configurator.new(file: path) }
    assert_match(/narwhal.rb/, e.message)
  end

  def test_unsupported_listen_option
    path = write_config("listen ':9000', tcp_nopushh: true\n")
    e = assert_raises(Narwhal::ConfigError) { Narwhal::Configurator.new(file: path) }
    assert_match(/:1: unsupported listen option/, e.message)
  end

  def test_missing_file
    e = assert_raises(Narwhal::ConfigError) { Narwhal::Configurator.new(file: "/nonexistent/narwhal.rb") }
    assert_match(/cannot read config file/, e.message)
  end

  def test_unicorn_only_directives_and_listen_options_are_accepted
    path = write_config(<<~CONF)
      listeners ["127.0.0.1:9001", "/tmp/narwhal-x.sock"]
      listen 9002, tcp_defer_accept: true, accept_filter: "httpready", tcp_nopush: true
      trust_x_forwarded false
    CONF
    config = Narwhal::Configurator.new(file: path)
    assert_equal ["127.0.0.1:9001", "/tmp/narwhal-x.sock", "9002"], config.listeners.map(&:first)
    assert_equal false, config[:trust_x_forwarded]
  end
end
