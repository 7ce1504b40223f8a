# frozen_string_literal: true

require "test_helper"
require "support/spool_reading"
require "socket"

# The connection's writer over a socket pair whose reader does not read:
# it never waits while the spool has room, keeps the order of everything
# written, and waits under its timeout as before once it has none.
class SocketWriterTest < Minitest::Test
  include Narwhal::SpoolReading

  BIG = 4 * 1024 * 1024 # more than a socket pair buffers

  def setup
    @budget = Narwhal::SocketWriter::SpoolBudget.new(64 * 1024 * 1024, 64 * 1024, disk_reserve: 0)
    @sock, @peer = UNIXSocket.pair
    @writer = Narwhal::SocketWriter.new(@sock, 0.3, @budget)
  end

  def teardown
    @writer.discard_spool
    @sock.close unless @sock.closed?
    @peer.close unless @peer.closed?
  end

  def now = Narwhal::Clock.now

  # Descriptors of temporary files this process holds open.
  def temp_files
    Dir.children("/proc/self/fd").select do |fd|
      File.readlink("/proc/self/fd/#{fd}").end_with?("(deleted)")
    rescue SystemCallError
      false
    end
  end

  def test_a_write_the_client_does_not_read_returns_at_once_and_is_spooled
    started = now
    @writer.write("a" * BIG)
    @writer.write("b" * 1000) # behind what is spooled
    assert_operator now - started, :<, 0.3, "no wait for the client"
    assert @writer.pending?
    got = receive(BIG + 1000)
    assert got == ("a" * BIG) + ("b" * 1000), "all of it, in order"
    refute @writer.pending?
    assert_equal 0, @budget.used
  end

  def test_a_reader_that_keeps_up_leaves_the_spool_empty
    reader = Thread.new { got = +""; got << @peer.readpartial(65_536) while got.bytesize < 200 * 100; got }
    200.times do |i|
      @writer.write(format("%099d\n", i))
      refute @writer.pending?, "the socket took it"
    end
    assert_equal Array.new(200) { |i| format("%099d\n", i) }.join, reader.value
  end

  def test_a_file_the_client_does_not_read_is_spooled_as_a_range_not_copied
    Tempfile.create("body") do |f|
      f.write(Random.new(2).bytes(BIG))
      f.flush
      files = temp_files
      started = now
      assert_equal BIG, File.open(f.path, "rb") { |file| @writer.write_file(file, BIG) }
      assert_operator now - started, :<, 0.3, "no wait for the client"
      assert @writer.pending?
      assert_empty temp_files - files, "no temporary copy"
      assert_equal 0, @budget.used
      assert receive(BIG) == File.binread(f.path), "the file, intact"
    end
  end

  def test_without_a_budget_it_waits_and_times_out_as_before
    writer = Narwhal::SocketWriter.new(@sock, 0.3)
    started = now
    assert_raises(Narwhal::WriteTimeout) { writer.write("a" * BIG) }
    assert_operator now - started, :>=, 0.3
  end

  def test_a_budget_of_zero_spools_nothing_not_even_a_file_range
    writer = Narwhal::SocketWriter.new(@sock, 0.3, Narwhal::SocketWriter::SpoolBudget.new(0, 64 * 1024))
    Tempfile.create("body") do |f|
      f.write("x" * BIG)
      f.flush
      assert_raises(Narwhal::WriteTimeout) { writer.write_file(f, BIG) }
    end
    refute writer.pending?
  end

  # Memory and disk both spent: 1 MiB in all.
  def full_budget(**disk)
    Narwhal::SocketWriter::SpoolBudget.new(512 * 1024, 64 * 1024, disk_max: 512 * 1024, disk_reserve: 0, **disk)
  end

  def assert_waits_under_the_timeout(budget)
    writer = Narwhal::SocketWriter.new(@sock, 0.3, budget)
    started = now
    assert_raises(Narwhal::WriteTimeout) { writer.write("a" * BIG) }
    assert_operator now - started, :>=, 0.3
    assert_equal 0, budget.used, "the spool is dropped with the response"
    refute writer.pending?
  end

  def test_past_the_budget_it_sends_the_spool_then_waits_under_the_timeout
    assert_waits_under_the_timeout(full_budget)
  end

  def test_past_the_per_response_disk_limit_it_waits_under_the_timeout
    assert_waits_under_the_timeout(full_budget(disk_max: BIG * 2, file_max: 1024 * 1024))
  end

  def test_below_the_free_space_reserve_it_waits_under_the_timeout
    assert_waits_under_the_timeout(full_budget(disk_max: BIG * 2, disk_reserve: 1 << 30, free_space: -> { 1 << 30 }))
  end

  def test_with_room_on_disk_a_large_write_never_waits
    writer = Narwhal::SocketWriter.new(@sock, 0.3, full_budget(disk_max: BIG * 2))
    writer.write("a" * BIG)
    assert writer.pending?, "spooled, memory then disk"
  ensure
    writer&.discard_spool
  end

  def test_past_the_budget_a_reading_client_gets_everything_in_order
    budget = full_budget
    writer = Narwhal::SocketWriter.new(@sock, 5, budget)
    writer.write("a" * (BIG / 8)) # spooled: nobody reads yet
    assert writer.pending?
    reader = Thread.new { got = +""; got << @peer.readpartial(1 << 20) while got.bytesize < BIG + (BIG / 8); got }
    writer.write("b" * BIG) # past the budget: sends the spool, then this, waiting
    writer.flush
    got = reader.value
    assert got == ("a" * (BIG / 8)) + ("b" * BIG), "in order"
  end

  def test_flush_waits_until_the_spool_is_sent
    @writer.write("a" * BIG)
    reader = Thread.new { got = +""; got << @peer.readpartial(1 << 20) while got.bytesize < BIG; got }
    @writer.flush
    refute @writer.pending?
    assert_equal BIG, reader.value.bytesize
  end

  def test_a_client_gone_drops_the_spool
    @writer.write("a" * BIG)
    @peer.close
    assert_raises(Narwhal::ClientGone) { @writer.flush_nonblock }
    refute @writer.pending?
    assert_equal 0, @budget.used
  end

  def test_discard_spool_frees_memory_and_files
    files = temp_files
    @writer.write("a" * BIG)
    assert_equal 1, (temp_files - files).size, "spooled to a temporary file"
    @writer.discard_spool
    assert_empty temp_files - files
    assert_equal 0, @budget.used
  end
end
