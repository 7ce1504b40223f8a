# frozen_string_literal: true

require "test_helper"
require "logger"
require "stringio"

# Replacing workers over a limit: the replacement first, QUIT to the old
# one only once it serves, one at a time, and what happens when the
# replacement does not boot or the old worker goes by other means.
class RecyclerTest < Minitest::Test
  # The master's worker table as the Recycler uses it.
  class FakeTable
    attr_reader :signals, :workers, :logger
    attr_accessor :held_back, :numbers_left

    def initialize(count, logger)
      @logger = logger
      @workers = Array.new(count) { |nr| worker(nr) }
      @signals = []
      @held_back = false
      @numbers_left = true
    end

    def worker(nr, place = nil)
      Narwhal::Worker.new(nr).tap do |w|
        w.pid = 100 + nr
        w.ready = true
        w.stand_in_for = place
      end
    end

    def alive?(worker)
      @workers.any? { |w| w.equal?(worker) }
    end

    def number_for(_place, _from)
      @numbers_left ? 99 : nil
    end

    def spawn_stand_in(old, from:)
      return nil if @held_back

      nr = (@workers.map(&:nr) + [from - 1]).max + 1
      worker(nr, old.place).tap do |w|
        w.ready = false
        @workers << w
      end
    end

    def signal(worker, sig)
      worker.quitting = true if sig == :QUIT
      @signals << [worker.nr, sig]
    end

    def exit(worker)
      @workers.delete(worker)
    end
  end

  def setup
    @log = StringIO.new
    logger = Logger.new(@log)
    logger.formatter = ->(_severity, _time, _prog, message) { "#{message}\n" }
    @table = FakeTable.new(3, logger)
    @tally = Narwhal::Master::Tally.new
    @recycler = Narwhal::Master::Recycler.new(@table, @tally)
  end

  def nr(number)
    @table.workers.find { |w| w.nr == number }
  end

  def test_the_old_worker_gets_quit_only_once_its_replacement_serves
    @recycler.retire(nr(1), :memory_recycles)
    @recycler.step(3)
    assert_equal [0, 1, 2, 3], @table.workers.map(&:nr)
    assert_equal 1, nr(3).place, "the replacement holds worker 1's place"
    assert_includes @log.string, "worker=3 pid=103 forked to replace worker=1 pid=101\n"
    @recycler.step(3)
    assert_empty @table.signals, "no QUIT while the replacement boots"
    assert_equal 0, @tally[:memory_recycles]

    nr(3).ready = true
    @recycler.step(3)
    assert_equal [[1, :QUIT]], @table.signals
    assert_includes @log.string, "worker=3 pid=103 serves in place of worker=1 pid=101: sending it QUIT\n"
    assert_equal 1, @tally[:memory_recycles]
    @recycler.step(3)
    assert_equal 1, @table.signals.size, "retired once"
    assert_equal 4, @table.workers.size, "one replacement"
  end

  # A worker a soft timeout interrupted asks to go: replaced the same way,
  # and counted as no limit's recycle.
  def test_a_retirement_without_an_event_is_replaced_first_and_counted_nowhere
    @recycler.retire(nr(0), nil)
    @recycler.step(3)
    nr(3).ready = true
    @recycler.step(3)
    assert_equal [[0, :QUIT]], @table.signals
    assert_equal({ respawns: 0, timeout_kills: 0, memory_recycles: 0, request_recycles: 0 }, @tally.to_h)
  end

  def test_workers_over_a_limit_together_are_replaced_one_at_a_time_in_order
    @recycler.retire(nr(2), :request_recycles)
    @recycler.retire(nr(0), :memory_recycles)
    @recycler.retire(nr(2), :request_recycles) # again: ignored
    @recycler.step(3)
    assert_equal [3], @table.workers.map(&:nr) - [0, 1, 2], "one replacement boots at a time"
    assert_equal 2, nr(3).place
    nr(3).ready = true
    @recycler.step(3)
    assert_equal [[2, :QUIT]], @table.signals
    assert_equal 0, nr(4).place, "the next one's replacement is forked at once"
    nr(4).ready = true
    @recycler.step(3)
    assert_equal [[2, :QUIT], [0, :QUIT]], @table.signals
    assert_equal [1, 1], [@tally[:request_recycles], @tally[:memory_recycles]]
  end

  def test_a_replacement_that_does_not_boot_is_tried_again_while_the_old_worker_serves
    @recycler.retire(nr(0), :memory_recycles)
    @recycler.step(3)
    @table.exit(nr(3)) # died before it was ready
    @table.held_back = true # the respawn policy's back-off
    @recycler.step(3)
    assert_includes @log.string, "worker=0 pid=100 serves on: its replacement worker=3 pid=103 did not boot; " \
                                 "trying again\n"
    assert_empty @table.signals
    @recycler.step(3)
    assert_equal 3, @table.workers.size, "nothing forked while forks are held back"
    @table.held_back = false
    @recycler.step(3)
    assert_equal 0, nr(3).place, "forked again once allowed"
    nr(3).ready = true
    @recycler.step(3)
    assert_equal [[0, :QUIT]], @table.signals
  end

  def test_a_worker_that_goes_by_other_means_leaves_the_queue_and_its_replacement_holds_its_place
    @recycler.retire(nr(0), :memory_recycles)
    @recycler.retire(nr(1), :memory_recycles)
    @recycler.step(3)
    @table.exit(nr(0)) # it died, or was killed for timeout
    nr(1).quitting = true # HUP or TTOU retired it
    @recycler.step(3)
    assert_equal [0], [nr(3).place], "worker 0's replacement stays"
    assert_empty @table.signals
    assert_equal [1, 2, 3], @table.workers.map(&:nr), "nothing forked for worker 1"
    assert_equal 0, @tally[:memory_recycles]
  end

  def test_with_no_worker_number_free_the_old_worker_is_retired_first
    @table.numbers_left = false
    @recycler.retire(nr(1), :memory_recycles)
    @recycler.step(3)
    assert_equal [[1, :QUIT]], @table.signals
    assert_includes @log.string, "worker=1 pid=101: no worker number free for a replacement, retiring it first\n"
    assert_equal 1, @tally[:memory_recycles]
  end
end
