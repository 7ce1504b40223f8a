# frozen_string_literal: true

require "test_helper"
require_relative "../../support/config_files"

# worker_memory_limit and worker_max_requests: off by default, sizes read as
# written, and what they refuse.
class ConfiguratorRecyclingTest < Minitest::Test
  include Narwhal::ConfigFiles

  def test_worker_limits_are_off_by_default_and_read_sizes_as_written
    c = Narwhal::Configurator.new
    assert_nil c[:worker_memory_limit]
    assert_nil c[:worker_max_requests]
    c = config("worker_memory_limit \"1.5G\", pss: true, interval: 0.5\nworker_max_requests 1000\n")
    assert_equal [1536 * 1024 * 1024, true, 0.5], c.settings.values_at(:worker_memory_limit, :worker_memory_pss,
                                                                       :worker_memory_check_interval)
    assert_equal [1000, 100], [c[:worker_max_requests], c[:worker_max_requests_jitter]], "jitter: N / 10"
    c = config("worker_memory_limit 268435456\nworker_max_requests 500, jitter: 0\n")
    assert_equal [268_435_456, false, 5], c.settings.values_at(:worker_memory_limit, :worker_memory_pss,
                                                               :worker_memory_check_interval)
    assert_equal [500, 0], [c[:worker_max_requests], c[:worker_max_requests_jitter]]
  end

  def test_worker_limits_refuse_what_they_cannot_mean
    {
      "worker_memory_limit \"512 parsecs\"" => "worker_memory_limit expects bytes >= 1048576 (an Integer or a size " \
                                              "like \"512MB\"; nil: off), got \"512 parsecs\"",
      "worker_memory_limit 512" => "worker_memory_limit expects bytes >= 1048576 (an Integer or a size like " \
                                   "\"512MB\"; nil: off), got 512",
      "worker_memory_limit \"1G\", rss: true" => "worker_memory_limit's options are pss: and interval:, got " \
                                               "{:rss=>true}",
      "worker_memory_limit \"1G\", interval: 0" => "worker_memory_limit interval: expects seconds >= 0.1, got 0",
      "worker_max_requests 0" => "worker_max_requests expects an Integer >= 1 (nil: off), got 0",
      "worker_max_requests 10, jitter: -1" => "worker_max_requests jitter: expects an Integer >= 0, got -1",
      "term_graceful :yes" => "term_graceful expects true or false, got :yes",
      "drain_delay -1" => "drain_delay expects a number >= 0, got -1",
      "graceful_timeout 0" => "graceful_timeout expects a number >= 0.001, got 0"
    }.each do |line, message|
      assert_equal "2: #{message}", config_error("listen ':0'\n#{line}\n"), line
    end
  end
end
