# frozen_string_literal: true

require "test_helper"
require "logger"
require "stringio"

# Both sides of a USR2 upgrade as the master runs them, on a master past
# its start: the old master following its successor, the new master's
# verdict.
class MasterUpgradeTest < Minitest::Test
  Upgrade = Narwhal::Master::Upgrade

  def setup
    @log = StringIO.new
    @logger = Logger.new(@log)
    @workers = Array.new(2) { |nr| Narwhal::Worker.new(nr).tap { |w| w.pid = 300 + nr } }
    @master = Narwhal::Master.allocate.tap do |m|
      { logger: @logger, worker_processes: 2, workers: @workers, successor: nil, probation: nil }
        .each { |name, value| m.instance_variable_set(:"@#{name}", value) }
    end
  end

  # The old master after USR2: a successor pid=4242 whose end of the
  # channel the test holds.
  def upgrading
    reader, writer = IO.pipe
    @new_master = Upgrade::Channel.new(nil, writer, {})
    successor = Upgrade::Successor.new(4242, Upgrade::Channel.new(reader, nil, {}), @logger)
    @master.instance_variable_set(:@successor, successor)
  end

  def pass
    @master.send(:follow_successor)
  end

  # /ready of an old master with no worker of its own left is 200 while
  # its successor serves (Control::Status asks).
  def test_the_successor_serving_is_what_ready_hears
    refute @master.successor_serving?
    upgrading
    refute @master.successor_serving?
    @new_master.tell(:serving)
    pass
    assert @master.successor_serving?
    assert_includes @log.string, "upgrade: the new master pid=4242 serves (a first worker)"
    @new_master.tell(:ready)
    pass
    assert @master.successor_serving?
    assert_includes @log.string, "upgrade succeeded: the new master pid=4242 serves with all its workers"
    @new_master.tell(:failed, "gone")
    @master.send(:successor_exited)
    refute @master.successor_serving?
    assert_includes @log.string, "upgrade failed: the new master pid=4242 gave up: gone"
    assert_nil @master.instance_variable_get(:@successor)
  end

  def test_the_new_master_tells_once_every_worker_serves
    reader, writer = IO.pipe
    probation = Upgrade::Probation.new(Upgrade::Channel.new(nil, writer, { "old_pid" => 99 }), @logger)
    @master.instance_variable_set(:@probation, probation)
    @workers.first.ready = true
    @master.send(:judge_probation)
    assert probation.pending?
    @workers.last.ready = true
    @master.send(:judge_probation)
    refute probation.pending?
    assert_equal [["ready", ""]], Upgrade::Channel.new(reader, nil, {}).messages
  end
end
