# frozen_string_literal: true

require "test_helper"

# Narwhal::Server::Limits: the request limits and client timeouts read from a configuration.
class ServerLimitsTest < Minitest::Test
  DIRECTIVES = { body_buffer_size: :client_body_buffer_size, max_body_size: :client_max_body_size,
                 max_request_line: :max_request_line, max_header_size: :max_header_size,
                 max_header_fields: :max_header_fields, keepalive_timeout: :keepalive_timeout,
                 keepalive_requests: :keepalive_requests, client_header_timeout: :client_header_timeout,
                 client_body_timeout: :client_body_timeout, write_timeout: :write_timeout,
                 queue_deadline: :queue_deadline, keepalive_rebalance: :keepalive_rebalance }.freeze

  def test_each_limit_comes_from_its_directive
    config = Narwhal::Configurator.new
    DIRECTIVES.each_with_index { |(_, directive), i| config.settings[directive] = 1000 + i }
    limits = Narwhal::Server::Limits.from(config)
    DIRECTIVES.each_with_index { |(member, _), i| assert_equal 1000 + i, limits[member], member }
    assert_equal DIRECTIVES.keys, Narwhal::Server::Limits.members
  end

  def test_the_defaults_are_the_configurations_and_frozen
    config = Narwhal::Configurator.new
    limits = Narwhal::Server::Limits.from(config)
    assert limits.frozen?
    assert_raises(FrozenError) { limits.keepalive_timeout = 1 }
    assert_equal config[:keepalive_timeout], limits.keepalive_timeout
    assert_equal config[:client_max_body_size], limits.max_body_size
  end

  def test_built_by_keyword
    limits = Narwhal::Server::Limits.new(keepalive_timeout: 7)
    assert_equal 7, limits.keepalive_timeout
    assert_nil limits.write_timeout
    assert_raises(ArgumentError) { Narwhal::Server::Limits.new(no_such_limit: 1) }
  end
end
