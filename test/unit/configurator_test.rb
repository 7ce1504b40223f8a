# frozen_string_literal: true

require "test_helper"
require_relative "../support/config_files"

# The configuration as a whole: defaults, client_timeout and its parts,
# reading the file, and its Ruby errors. Each directive is its part's test
# (configurator/dsl_test.rb, paths_test.rb, recycling_test.rb...).
class ConfiguratorTest < Minitest::Test
  include Narwhal::ConfigFiles

  def test_defaults
    c = Narwhal::Configurator.new
    assert_equal 112 * 1024, c[:client_body_buffer_size]
    assert_equal 5, c[:keepalive_timeout]
    assert_equal [["127.0.0.1:8080", {}]], c.listeners
  end

  def client_timeouts(c)
    [c[:client_header_timeout], c[:client_body_timeout]]
  end

  def test_client_timeout_parts_default_to_the_umbrella
    assert_equal [30, 30], client_timeouts(Narwhal::Configurator.new)
    assert_equal [7, 7], client_timeouts(config("client_timeout 7\n"))
  end

  def test_a_client_timeout_part_given_on_its_own_wins_in_either_order
    assert_equal [2, 7], client_timeouts(config("client_header_timeout 2\nclient_timeout 7\n"))
    assert_equal [2, 7], client_timeouts(config("client_timeout 7\nclient_header_timeout 2\n"))
    assert_equal [7, 0.5], client_timeouts(config("client_body_timeout 0.5\nclient_timeout 7\n"))
    assert_equal [7, 0.5], client_timeouts(config("client_timeout 7\nclient_body_timeout 0.5\n"))
    assert_equal [2, 60], client_timeouts(config("client_body_timeout 60\nclient_header_timeout 2\n"))
    assert_equal [2, 30], client_timeouts(config("client_header_timeout 2\n")), "the other keeps the default"
  end

  def test_ruby_errors_read_without_class_names
    assert_equal "2: uninitialized constant Fooo", config_error("listen ':0'\nx = Fooo\n")
    assert_equal "1: /nonexistent/secret: no such file or directory", config_error("File.read('/nonexistent/secret')\n")
    assert_equal "1: key not found: \"NARWHAL_TEST_UNSET\"", config_error("ENV.fetch('NARWHAL_TEST_UNSET')\n")
    message = config_error("worker_processes 2 3\n")
    assert_match(/\A1: syntax error, unexpected integer literal/, message)
    refute_match(/SyntaxError|NameError|Errno|KeyError/, message)
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

  def test_missing_file
    e = assert_raises(Narwhal::ConfigError) { Narwhal::Configurator.new(file: "/nonexistent/narwhal.rb") }
    assert_equal "cannot read config file /nonexistent/narwhal.rb: no such file or directory", e.message
  end

  def test_problems_before_a_ruby_error_are_reported_with_it
    message = config_error("frobnicate\nworkers 3\nthreads 2\nx = Fooo\nworkerz 9\n")
    assert_equal "1: unknown directive frobnicate\n#{@path}:2: workers is a Puma directive: use worker_processes 3" \
                 "\n#{@path}:4: uninitialized constant Fooo", message
    message = config_error("threads 0\nsoft_timeout 90\n")
    assert_equal "1: threads expects an Integer from 1 to 256, got 0\n#{@path}:2: soft_timeout 90 must be below " \
                 "timeout (60): the master kills the worker at timeout, so the soft timeout would never come", message
  end
end
