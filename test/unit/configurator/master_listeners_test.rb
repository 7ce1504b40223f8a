# frozen_string_literal: true

require "test_helper"
require_relative "../../support/config_files"

# control_listen and agent_listen: off by default, addresses read as
# `listen` reads them, and what they refuse, with the file's line.
class ConfiguratorMasterListenersTest < Minitest::Test
  include Narwhal::ConfigFiles

  def test_off_by_default
    c = Narwhal::Configurator.new
    assert_nil c[:agent_listen]
    assert_nil c[:control_listen]
  end

  def test_addresses_as_listen_takes_them
    c = config(%(control_listen "127.0.0.1:9394"\nagent_listen "127.0.0.1:9395"\n))
    assert_equal %w[127.0.0.1:9394 127.0.0.1:9395], c.settings.values_at(:control_listen, :agent_listen)
    assert_equal "9395", config("agent_listen 9395\n")[:agent_listen]
    assert_equal "/run/agent.sock", config("agent_listen '/run/agent.sock'\n")[:agent_listen]
    assert_nil config("agent_listen 9395\nagent_listen nil\n")[:agent_listen], "nil turns it off"
  end

  def test_what_they_refuse
    {
      "agent_listen 'nope:port'" =>
        "agent_listen: invalid listen address \"nope:port\" (use #{Narwhal::Listener::FORMS})",
      "agent_listen 70000" => "agent_listen: invalid listen address 70000: port above 65535",
      "agent_listen true" => "agent_listen expects an address String (or nil: none), got true",
      "control_listen :x" => "control_listen expects an address String (or nil: none), got :x"
    }.each do |line, message|
      assert_equal "2: #{message}", config_error("listen ':0'\n#{line}\n"), line
    end
  end
end
