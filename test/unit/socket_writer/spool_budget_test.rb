# frozen_string_literal: true

require "test_helper"

# The per-worker bounds on spooled response bytes, shared by threads:
# memory, then disk (per response, per worker, and the free space left).
class SpoolBudgetTest < Minitest::Test
  PLENTY = 1 << 40 # free bytes on a file system with room

  def budget(memory_max = 100, file_max: 1000, disk_max: 1000, disk_reserve: 0, free: PLENTY)
    Narwhal::SocketWriter::SpoolBudget.new(memory_max, 10, file_max: file_max, disk_max: disk_max, disk_reserve: disk_reserve,
                                             free_space: -> { free.respond_to?(:call) ? free.call : free })
  end

  def test_memory_is_taken_while_it_fits_and_given_back
    b = budget(100)
    assert b.reserve_memory(60)
    assert b.reserve_memory(40)
    refute b.reserve_memory(1), "past the bound"
    assert_equal 100, b.memory_used
    b.release_memory(50)
    refute b.reserve_memory(51)
    assert b.reserve_memory(50)
    assert_equal 100, b.used
  end

  def test_a_refused_reservation_takes_nothing
    b = budget(100, disk_max: 100)
    assert b.reserve_memory(90)
    refute b.reserve_memory(20)
    assert b.reserve_disk(90, 0)
    refute b.reserve_disk(20, 0)
    assert_equal [90, 90, 180], [b.memory_used, b.disk_used, b.used]
  end

  def test_disk_is_counted_apart_from_memory
    b = budget(100, disk_max: 500)
    assert b.reserve_memory(100)
    refute b.reserve_memory(1), "memory spent"
    assert b.reserve_disk(400, 0), "the disk still has room"
    assert_equal [100, 400], [b.memory_used, b.disk_used]
    b.release_disk(400)
    assert_equal 100, b.used
  end

  def test_one_response_takes_at_most_file_max_on_disk
    b = budget(file_max: 300, disk_max: 1000)
    assert b.reserve_disk(100, 200), "200 in its file, 100 more: 300"
    refute b.reserve_disk(1, 300), "past 300 for that response"
    assert b.reserve_disk(300, 0), "another response has its own 300"
    assert_equal 400, b.disk_used
  end

  def test_the_worker_takes_at_most_disk_max_on_disk
    b = budget(file_max: 1000, disk_max: 500)
    assert b.reserve_disk(300, 0)
    assert b.reserve_disk(200, 0)
    refute b.reserve_disk(1, 0), "500 held by the worker's responses"
    b.release_disk(200)
    assert b.reserve_disk(200, 0)
  end

  def test_the_reserve_stays_free_on_the_file_system
    free = 1000
    b = budget(disk_reserve: 600, free: -> { free })
    assert b.reserve_disk(400, 0), "1000 free, 600 left after"
    free = 600 # the file system as others see it now
    refute b.reserve_disk(1, 0), "599 would be left"
    free = 700
    assert b.reserve_disk(100, 0)
    assert_equal 500, b.disk_used
  end

  def test_a_file_system_that_cannot_be_read_has_no_room
    b = budget(free: -> { raise Errno::ENOENT, "/gone" })
    refute b.reserve_disk(1, 0)
    assert_equal 0, b.disk_used
  end

  def test_free_space_is_read_from_the_spools_file_system
    Dir.mktmpdir do |dir|
      b = Narwhal::SocketWriter::SpoolBudget.new(100, 10, disk_reserve: 0, dir: dir)
      assert_equal dir, b.dir
      assert b.reserve_disk(1, 0)
      gone = Narwhal::SocketWriter::SpoolBudget.new(100, 10, disk_reserve: 0, dir: File.join(dir, "missing"))
      refute gone.reserve_disk(1, 0)
    end
  end

  def test_a_memory_budget_of_zero_turns_spooling_off_disk_included
    b = budget(0)
    refute b.spooling?
    refute b.reserve_memory(1)
    refute b.reserve_disk(1, 0)
  end

  def test_built_from_the_configuration_with_its_defaults
    b = Narwhal::SocketWriter::SpoolBudget.from_config(Narwhal::Configurator.new)
    assert_equal [256 << 20, 64 << 10], [b.memory_max, b.buffer_size]
    assert_equal [1 << 30, 4 << 30, 1 << 30], [b.file_max, b.disk_max, b.disk_reserve]
    assert_equal Dir.tmpdir, b.dir
  end

  def test_threads_share_it_without_losing_count_or_passing_the_bounds
    b = budget(1000, file_max: 100, disk_max: 1000)
    over = false
    threads = Array.new(8) do
      Thread.new do
        2000.times do
          memory = b.reserve_memory(100)
          disk = b.reserve_disk(100, 0)
          over ||= b.memory_used > 1000 || b.disk_used > 1000
          b.release_memory(100) if memory
          b.release_disk(100) if disk
        end
      end
    end
    threads.each(&:join)
    refute over, "never past the bounds"
    assert_equal 0, b.used
  end
end
