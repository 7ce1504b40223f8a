# frozen_string_literal: true

require "test_helper"
require "logger"
require "stringio"

# upgrade_retire_old's steps: one old worker fewer at a time, the next only
# once the last one is gone, then the old master may stop.
class MasterUpgradeHandoffTest < Minitest::Test
  Handoff = Narwhal::Master::Upgrade::Handoff

  def setup
    @log = StringIO.new
    @handoff = Handoff.new(777, Logger.new(@log))
    @workers = Array.new(3) { |nr| Narwhal::Worker.new(nr).tap { |w| w.pid = 100 + nr } }
  end

  # What the master's loop does with the count: QUIT beyond it (TTOU's way).
  def retire_beyond(count)
    @workers.each { |w| w.quitting = true if w.place >= count }
  end

  def test_one_worker_at_a_time_each_once_the_last_is_gone
    count = @handoff.step(@workers, 3)
    assert_equal 2, count
    retire_beyond(count)
    assert_includes @log.string, "upgrade: retiring old worker=2 pid=102 (1 retired, 2 left); the new master pid=777 serves"
    assert_equal 2, @handoff.step(@workers, count), "worker 2 still finishing"
    @workers.pop # reaped
    assert_equal 1, (count = @handoff.step(@workers, count))
    retire_beyond(count)
    @workers.pop
    assert_equal 0, (count = @handoff.step(@workers, count))
    refute @handoff.done?(@workers, count), "worker 0 is still there"
    @workers.pop
    assert_equal 0, @handoff.step(@workers, count)
    assert @handoff.done?(@workers, 0)
    assert_includes @log.string, "worker=0 pid=100 (3 retired, 0 left)"
  end

  # A stand-in forked for a recycled worker holds its place: both go.
  def test_a_stand_in_goes_with_its_place
    stand_in = Narwhal::Worker.new(3)
    stand_in.pid = 103
    stand_in.stand_in_for = 2
    @workers << stand_in
    @handoff.step(@workers, 3)
    assert_equal 2, @log.string.scan("retiring old worker").size
  end
end
