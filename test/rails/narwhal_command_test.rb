# frozen_string_literal: true

require_relative "rails_app_cases"

# `bundle exec narwhal -c config/narwhal.rb` on the sample app, as a
# Unicorn user would run it.
class NarwhalCommandTest < Minitest::Test
  include RailsAppCases

  def self.start_server
    Narwhal::RailsApp.start([Gem.bin_path("bundler", "bundle"), "exec", "narwhal", "-c", "config/narwhal.rb",
                             "-l", "127.0.0.1:0"])
  end

  def test_config_file_workers
    assert_equal %w[0 1], server.log.scan(/sample_app: worker=(\d) serving Rails/).flatten.sort
    assert_equal 2, server.worker_pids.size
  end
end
