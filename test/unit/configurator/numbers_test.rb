# frozen_string_literal: true

require "test_helper"
require_relative "../../support/config_files"

# Numbers written as Strings (what ENV.fetch gives): read as numbers where a
# directive wants one, refused as written when they are none.
class ConfiguratorNumbersTest < Minitest::Test
  include Narwhal::ConfigFiles

  # What ENV.fetch gives: a String, wherever the directive wants a number.
  def test_numbers_from_the_environment_are_read_as_numbers
    env = { "RAILS_MAX_THREADS" => "5", "WEB_CONCURRENCY" => "3", "TIMEOUT" => "2.5", "BODY" => "1048576",
            "JITTER" => " 4 ", "BACKLOG" => "64", "SOFT" => "1.5" }
    c = config(<<~RUBY)
      env = #{env.inspect}
      threads env.fetch("RAILS_MAX_THREADS", 3)
      worker_processes env.fetch("WEB_CONCURRENCY", 2)
      timeout env.fetch("TIMEOUT")
      soft_timeout env.fetch("SOFT")
      keepalive_timeout "0"
      client_max_body_size env.fetch("BODY")
      worker_connections "100"
      worker_max_requests "500", jitter: env.fetch("JITTER")
      listen "127.0.0.1:0", backlog: env.fetch("BACKLOG")
    RUBY
    assert_equal [5, 3, 2.5, 1.5, 0, 1_048_576, 100], c.settings.values_at(:threads, :worker_processes, :timeout,
                                                                          :soft_timeout, :keepalive_timeout,
                                                                          :client_max_body_size, :worker_connections)
    assert_equal [500, 4], c.settings.values_at(:worker_max_requests, :worker_max_requests_jitter)
    assert_equal [["127.0.0.1:0", { backlog: 64 }]], c.listeners
    assert_equal 5, config("threads '5', '5'\n")[:threads], "Puma's form"
  end

  # A number read from a String is checked as the number; a String that is
  # no number is refused as it came.
  def test_number_strings_keep_the_range_checks_and_the_line
    assert_equal "2: threads expects an Integer from 1 to 256, got 0", config_error("\nthreads '0'\n")
    assert_equal '1: threads expects an Integer from 1 to 256, got "5.5"', config_error("threads '5.5'\n")
    assert_equal '1: worker_processes expects an Integer >= 1 or :auto, got "two"',
                 config_error("worker_processes 'two'\n")
    assert_equal "2: worker_processes 64 x threads 65 is more than 4096 request threads",
                 config_error("worker_processes '64'\nthreads '65'\n")
    assert_equal "1: timeout expects a number >= 0.001, got 0", config_error("timeout '0'\n")
    assert_equal '1: keepalive_timeout expects a number >= 0, got "5s"', config_error("keepalive_timeout '5s'\n")
    assert_equal '1: worker_connections expects an Integer >= 1, got ""', config_error("worker_connections ''\n")
    assert_equal "1: listen option backlog: invalid value -1", config_error("listen ':0', backlog: '-1'\n")
    refute_nil config("worker_processes 'auto'\n")[:worker_processes_auto], "as WEB_CONCURRENCY=auto"
  end

  def test_whole_numbers_are_integers_decimals_are_seconds
    numbers = Narwhal::Configurator::Numbers
    assert_equal [5, -1, 64], ["5", " -1 ", "+64"].map { |text| numbers.integer(text) }
    assert_equal "2.5", numbers.integer("2.5"), "no Integer: left for the directive to refuse"
    assert_equal [2.5, 3, 0], ["2.5", "3", "0"].map { |text| numbers.seconds(text) }
    assert_kind_of Integer, numbers.seconds("3")
  end

  def test_anything_else_comes_back_as_it_was
    numbers = Narwhal::Configurator::Numbers
    ["5s", "", "1e3", "0x10", "1_000", "five", nil, 1.5, :auto].each do |value|
      assert_equal value.inspect, numbers.integer(value).inspect, "integer(#{value.inspect})"
      assert_equal value.inspect, numbers.seconds(value).inspect, "seconds(#{value.inspect})"
    end
  end
end
