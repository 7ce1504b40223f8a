# frozen_string_literal: true

require "test_helper"

class WebConcurrencyTest < Minitest::Test
  def test_a_count_unset_or_empty
    assert_equal 3, Narwhal::Configurator::WebConcurrency.worker_processes("WEB_CONCURRENCY" => "3")
    assert_equal 12, Narwhal::Configurator::WebConcurrency.worker_processes("WEB_CONCURRENCY" => " 12\n")
    assert_nil Narwhal::Configurator::WebConcurrency.worker_processes({})
    assert_nil Narwhal::Configurator::WebConcurrency.worker_processes("WEB_CONCURRENCY" => "")
    assert_equal :auto, Narwhal::Configurator::WebConcurrency.worker_processes("WEB_CONCURRENCY" => "auto")
  end

  def test_anything_else_is_refused_with_its_value
    ["0", "-2", "2.5", "AUTO", "automatic", "0x10"].each do |value|
      e = assert_raises(Narwhal::ConfigError) { Narwhal::Configurator::WebConcurrency.worker_processes("WEB_CONCURRENCY" => value) }
      assert_equal "WEB_CONCURRENCY=#{value.inspect} is not a worker count (a whole number >= 1, or auto)", e.message
    end
  end

  def test_it_is_the_default_of_worker_processes_and_a_config_file_wins
    Dir.mktmpdir do |dir|
      file = File.join(dir, "narwhal.rb")
      File.write(file, "worker_processes 2\n")
      with_env("WEB_CONCURRENCY" => "5") do
        assert_equal 5, Narwhal::Configurator.new[:worker_processes]
        assert_equal 2, Narwhal::Configurator.new(file: file)[:worker_processes]
      end
      with_env("WEB_CONCURRENCY" => nil) { assert_equal 1, Narwhal::Configurator.new[:worker_processes] }
    end
  end
end
