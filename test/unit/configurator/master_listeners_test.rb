# frozen_string_literal: true

require "test_helper"
require_relative "../../support/config_files"

# control_listen: off by default, addresses read as `listen` reads them,
# and what it refuses, with the file's line.
class ConfiguratorMasterListenersTest < Minitest::Test
  include Narwhal::ConfigFiles

  def test_off_by_default
    assert_nil Narwhal::Configurator.new[:control_listen]
  end

  def test_addresses_as_listen_takes_them
    assert_equal "127.0.0.1:9394", config(%(control_listen "127.0.0.1:9394"\n))[:control_listen]
    assert_equal "9394", config("control_listen 9394\n")[:control_listen]
    assert_nil config("control_listen 9394\ncontrol_listen nil\n")[:control_listen], "nil turns it off"
  end

  def test_what_it_refuses
    {
      "control_listen 'nope:port'" =>
        "control_listen: invalid listen address \"nope:port\" (use #{Narwhal::Listener::FORMS})",
      "control_listen 70000" => "control_listen: invalid listen address 70000: port above 65535",
      "control_listen :x" => "control_listen expects an address String (or nil: none), got :x"
    }.each do |line, message|
      assert_equal "2: #{message}", config_error("listen ':0'\n#{line}\n"), line
    end
  end
end
