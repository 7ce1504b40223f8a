# frozen_string_literal: true

require "test_helper"

# The clock every deadline uses: monotonic seconds, as a Float, that never
# go back and follow real time.
class ClockTest < Minitest::Test
  def test_seconds_that_never_go_back
    readings = Array.new(10_000) { Narwhal::Clock.now }
    assert(readings.all?(Float))
    assert_equal readings, readings.sort, "monotonic"
  end

  # Seconds, not milliseconds or nanoseconds: 50 ms read as about 0.05.
  def test_it_counts_seconds
    before = Narwhal::Clock.now
    wall = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    wait_until(interval: 0.005, message: "50 ms") { Process.clock_gettime(Process::CLOCK_MONOTONIC) - wall >= 0.05 }
    elapsed = Narwhal::Clock.now - before
    assert_operator elapsed, :>=, 0.05
    assert_operator elapsed, :<, 1.0
  end

  # The monotonic clock, not the wall clock: a wall-clock change (NTP, a VM
  # resumed) must not fire or delay a timeout.
  def test_it_is_the_monotonic_clock
    before = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    now = Narwhal::Clock.now
    assert_operator now, :>=, before
    assert_operator now, :<=, Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end
end
