# frozen_string_literal: true

require "test_helper"
require_relative "../../support/config_files"

# queue_deadline, trust_x_request_start, keepalive_rebalance and
# keepalive_release: their defaults, values as written, and what they refuse.
class ConfiguratorQueueingTest < Minitest::Test
  include Narwhal::ConfigFiles

  def test_off_by_default_and_read_as_written
    c = Narwhal::Configurator.new
    assert_equal [nil, 1, true], c.settings.values_at(:queue_deadline, :queue_deadline_retry_after,
                                                      :trust_x_request_start)
    c = config("queue_deadline 1\ntrust_x_request_start false\n")
    assert_equal [1.0, 1, false], c.settings.values_at(:queue_deadline, :queue_deadline_retry_after,
                                                       :trust_x_request_start)
    c = config("queue_deadline \"0.25\", retry_after: 5\n")
    assert_equal [0.25, 5], c.settings.values_at(:queue_deadline, :queue_deadline_retry_after)
    assert_nil config("queue_deadline 2\nqueue_deadline nil\n")[:queue_deadline]
    assert_equal 0.005, Narwhal::Configurator.new[:keepalive_rebalance]
    assert_equal 0.25, config("keepalive_rebalance 0.25\n")[:keepalive_rebalance]
    assert_nil config("keepalive_rebalance false\n")[:keepalive_rebalance]
    assert_nil config("keepalive_rebalance nil\n")[:keepalive_rebalance]
    assert_equal 0.5, Narwhal::Configurator.new[:keepalive_release]
    assert_equal 2.0, config("keepalive_release 2\n")[:keepalive_release]
    assert_nil config("keepalive_release false\n")[:keepalive_release]
  end

  def test_refuses_what_it_cannot_mean
    {
      "queue_deadline 0" => "queue_deadline expects a number of seconds > 0 (or nil: off), got 0",
      "queue_deadline :soon" => "queue_deadline expects a number of seconds > 0 (or nil: off), got :soon",
      "queue_deadline 1, retry: 2" => "queue_deadline's one option is retry_after:, got {:retry=>2}",
      "queue_deadline 1, retry_after: -1" => "queue_deadline retry_after: expects whole seconds >= 0, got -1",
      "queue_deadline 1, retry_after: 1.5" => "queue_deadline retry_after: expects whole seconds >= 0, got 1.5",
      "trust_x_request_start 1" => "trust_x_request_start expects true or false, got 1",
      "keepalive_rebalance -1" => "keepalive_rebalance expects a number of seconds >= 0 (or nil: off), got -1",
      "keepalive_release :soon" => "keepalive_release expects a number of seconds >= 0 (or nil: off), got :soon"
    }.each do |line, message|
      assert_equal "2: #{message}", config_error("listen ':0'\n#{line}\n"), line
    end
  end
end
