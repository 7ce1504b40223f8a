# frozen_string_literal: true

require "test_helper"

class ListenBannerTest < Minitest::Test
  def test_urls_for_each_kind_of_address
    assert_equal "http://127.0.0.1:8080", Narwhal::ListenBanner.url("127.0.0.1:8080")
    assert_equal "http://[::1]:8080", Narwhal::ListenBanner.url("[::1]:8080")
    assert_equal "unix:/run/app.sock", Narwhal::ListenBanner.url("/run/app.sock")
  end
end
