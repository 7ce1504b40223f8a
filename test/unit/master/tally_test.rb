# frozen_string_literal: true

require "test_helper"

class TallyTest < Minitest::Test
  def test_counts_each_event_from_zero
    tally = Narwhal::Master::Tally.new
    assert_equal({ respawns: 0, timeout_kills: 0, memory_recycles: 0, request_recycles: 0 }, tally.to_h)
    tally.count(:respawns)
    tally.count(:respawns, 2)
    assert_equal 3, tally[:respawns]
    assert_equal 0, tally[:timeout_kills]
  end

  def test_an_unknown_event_is_a_mistake
    assert_raises(ArgumentError) { Narwhal::Master::Tally.new.count(:respwans) }
  end
end
