# frozen_string_literal: true

require_relative "rails_app_cases"

# `bin/rails server -u narwhal` on the sample app: the handler finds
# config/narwhal.rb and runs its two workers.
class RailsServerTest < Minitest::Test
  include RailsAppCases

  def self.start_server
    Narwhal::RailsApp.start(%w[bin/rails server -u narwhal -b 127.0.0.1 -p 0])
  end

  def test_banner_config_file_and_workers
    log = server.log
    assert_match(/^=> Booting Narwhal$/, log)
    assert_match(/^=> Rails 7\.2\.\d+ application starting in development/, log)
    assert_includes log, "config_file=#{server.dir}/config/narwhal.rb (from config/narwhal.rb)"
    assert_equal %w[0 1], log.scan(/sample_app: worker=(\d) serving Rails/).flatten.sort
    assert_equal 2, server.worker_pids.size
  end
end
