# frozen_string_literal: true

require "test_helper"

class ConnectionCapTest < Minitest::Test
  Cap = Narwhal::Configurator::ConnectionCap

  def test_a_configured_count_is_kept_whatever_the_descriptor_limit
    assert_equal 1000, Cap.new(1000, descriptors: 64).limit
    assert_equal 5, Cap.new(5, descriptors: 1_048_576).limit
  end

  # An eighth of the limit is kept for listeners, logs, spool files and the
  # app's own descriptors, at least MIN_RESERVE.
  def test_unset_it_is_the_descriptor_limit_less_a_reserve
    assert_equal 17_500, Cap.new(nil, descriptors: 20_000).limit
    assert_equal 917_504, Cap.new(nil, descriptors: 1_048_576).limit
    assert_equal 1024 - 128, Cap.new(nil, descriptors: 1024).limit
    assert_equal 512 - Cap::MIN_RESERVE, Cap.new(nil, descriptors: 512).limit
  end

  # Below twice the reserve, half the limit: a worker under a tiny
  # `ulimit -n` still holds connections.
  def test_a_small_descriptor_limit_leaves_half_of_it
    assert_equal 64, Cap.new(nil, descriptors: 128).limit
    assert_equal 16, Cap.new(nil, descriptors: 32).limit
    assert_equal 1, Cap.new(nil, descriptors: 1).limit
  end

  def test_no_limit_at_all_holds_any_number
    assert_equal Float::INFINITY, Cap.new(nil, descriptors: Process::RLIM_INFINITY).limit
  end

  def test_the_soft_limit_of_this_process_is_read_when_none_is_given
    soft, = Process.getrlimit(:NOFILE)
    assert_equal Cap.new(nil, descriptors: soft).limit, Cap.new(nil).limit
  end
end
