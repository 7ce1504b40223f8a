# frozen_string_literal: true

require "test_helper"
require "socket"

# One connection's unsent response: memory, then a temporary file, and file
# ranges sent from the file itself; in order, within the worker's budget,
# leaving nothing behind.
class SocketWriterSpoolTest < Minitest::Test
  def setup
    @budget = Narwhal::SocketWriter::SpoolBudget.new(1024 * 1024, 16, disk_reserve: 0)
    @spool = Narwhal::SocketWriter::Spool.new(@budget)
    @out, @in = UNIXSocket.pair
    @before = open_files
  end

  def teardown
    @spool.close
    @out.close
    @in.close
  end

  # Descriptors of temporary and test files this process holds open.
  def open_files
    Dir.children("/proc/self/fd").select do |fd|
      File.readlink("/proc/self/fd/#{fd}").end_with?("(deleted)", ".narwhal-test")
    rescue SystemCallError
      false
    end
  end

  # How many of them were opened since setup (others may close meanwhile).
  def new_files
    (open_files - @before).size
  end

  # Flushes until the spool is empty, reading on the other side meanwhile.
  def drain
    got = +""
    until @spool.empty?
      @spool.flush_nonblock(@out)
      got << @in.read_nonblock(1 << 20, exception: false).then { |r| r.is_a?(String) ? r : "" }
    end
    got << @in.read_nonblock(1 << 20, exception: false).then { |r| r.is_a?(String) ? r : "" } while @in.wait_readable(0)
    got
  end

  def test_small_writes_stay_in_memory_and_go_out_in_order
    assert @spool.append("hello ")
    assert @spool.append("world")
    assert_equal 11, @spool.bytesize
    assert_equal 0, new_files, "no temporary file for bytes that fit in memory"
    assert_equal 11, @spool.flush_nonblock(@out)
    assert @spool.empty?
    assert_equal "hello world", @in.read_nonblock(100)
  end

  def test_bytes_beyond_the_buffer_size_go_to_a_temporary_file_freed_once_sent
    assert @spool.append("0123456789")
    assert @spool.append("a" * 100) # past the 16 bytes of memory
    assert @spool.append("tail")
    assert_equal 1, new_files, "one temporary file"
    assert_equal 114, @budget.used, "memory and file bytes both counted"
    assert_equal "0123456789#{'a' * 100}tail", drain
    assert_equal 0, new_files, "the temporary file is closed once empty"
    assert_equal 0, @budget.used
  end

  def test_a_file_range_is_sent_from_the_file_without_a_copy
    Tempfile.create(["body", ".narwhal-test"]) do |f|
      f.write("ABCDEFGHIJ")
      f.flush
      @spool.append("head:")
      File.open(f.path, "rb") { |file| assert @spool.append_file(file, 2, 5) } # closed: the spool has its own
      @spool.append(":end")
      assert_equal 9, @budget.used, "the file range takes no budget"
      assert_equal "head:CDEFG:end", drain
    end
  end

  def test_a_large_mix_arrives_whole_and_in_order_through_a_full_socket
    @out.setsockopt(Socket::SOL_SOCKET, Socket::SO_SNDBUF, 4096)
    Tempfile.create(["big", ".narwhal-test"]) do |f|
      f.write(Random.new(1).bytes(3 * 1024 * 1024))
      f.flush
      expected = +""
      5.times do |i|
        part = (i.to_s * 70_000).b
        assert @spool.append(part)
        expected << part
        assert @spool.append_file(f, i * 1000, 600_000)
        expected << File.binread(f.path, 600_000, i * 1000)
      end
      assert_operator @spool.flush_nonblock(@out), :<, expected.bytesize, "the socket takes only part at once"
      got = @in.read_nonblock(1 << 20)
      got << drain
      assert_equal expected.bytesize, got.bytesize
      assert got == expected, "same bytes in the same order"
    end
    assert_equal 0, new_files
  end

  def test_the_callers_string_may_change_after_append
    buf = +"first"
    @spool.append(buf)
    buf.replace("XXXXX")
    assert_equal "first", drain
  end

  def test_strings_of_any_encoding_are_kept_as_bytes
    @spool.append("\xFF".b)
    @spool.append("é")
    @spool.append("ü".encode("UTF-16LE"))
    assert_equal "\xFF\xC3\xA9\xFC\x00".b, drain
  end

  def test_once_the_workers_memory_is_spent_bytes_go_to_the_temporary_file
    budget = Narwhal::SocketWriter::SpoolBudget.new(20, 16, disk_reserve: 0)
    first = Narwhal::SocketWriter::Spool.new(budget)
    second = Narwhal::SocketWriter::Spool.new(budget)
    assert first.append("a" * 15)
    assert second.append("b" * 10), "15 + 10 is past 20 bytes of memory: on disk"
    assert_equal [15, 10], [budget.memory_used, budget.disk_used]
    assert_equal 1, new_files
  ensure
    first.close
    second.close
  end

  def test_past_the_per_response_disk_limit_append_refuses_and_keeps_nothing
    budget = Narwhal::SocketWriter::SpoolBudget.new(1024, 16, file_max: 50, disk_reserve: 0)
    spool = Narwhal::SocketWriter::Spool.new(budget)
    assert spool.append("a" * 15)
    assert spool.append("b" * 30)
    refute spool.append("c" * 30), "30 + 30 in the file is past 50"
    assert_equal 45, spool.bytesize
    assert_equal [15, 30], [budget.memory_used, budget.disk_used]
  ensure
    spool.close
  end

  def test_past_the_workers_disk_limit_append_refuses_and_keeps_nothing
    budget = Narwhal::SocketWriter::SpoolBudget.new(1024, 0, disk_max: 50, disk_reserve: 0)
    first = Narwhal::SocketWriter::Spool.new(budget)
    second = Narwhal::SocketWriter::Spool.new(budget)
    assert first.append("a" * 40)
    refute second.append("b" * 20), "40 + 20 on the worker's disk is past 50"
    assert second.empty?
    assert_equal 40, budget.disk_used
  ensure
    first.close
    second.close
  end

  def test_below_the_free_space_reserve_append_refuses_and_keeps_nothing
    free = 1000
    budget = Narwhal::SocketWriter::SpoolBudget.new(1024, 0, disk_reserve: 900, free_space: -> { free })
    spool = Narwhal::SocketWriter::Spool.new(budget)
    assert spool.append("a" * 100)
    free = 900
    refute spool.append("b"), "the file system keeps its reserve"
    assert_equal 100, spool.bytesize
  ensure
    spool.close
  end

  def test_disk_bytes_stay_counted_until_the_file_drains
    budget = Narwhal::SocketWriter::SpoolBudget.new(1024, 0, disk_reserve: 0)
    spool = Narwhal::SocketWriter::Spool.new(budget)
    @out.setsockopt(Socket::SOL_SOCKET, Socket::SO_SNDBUF, 4096)
    spool.append("x" * 200_000)
    spool.flush_nonblock(@out)
    refute spool.empty?
    assert_equal 200_000, budget.disk_used, "bytes sent from the file still hold the disk"
    @in.read_nonblock(1 << 20) until spool.flush_nonblock(@out) && spool.empty? && !@in.wait_readable(0)
    assert_equal 0, budget.used
  ensure
    spool.close
  end

  def test_close_frees_memory_file_and_descriptors
    Tempfile.create(["body", ".narwhal-test"]) do |f|
      f.write("x" * 100)
      f.flush
      @spool.append("m")
      @spool.append("t" * 100)
      @spool.append_file(f, 0, 100)
      assert_equal 3, new_files, "the temporary file, the test's file and the spool's own"
      @spool.close
      assert @spool.empty?
      assert_equal 0, @budget.used
      assert_equal 1, new_files, "only the test's own file is left"
    end
  end

  def test_a_file_shorter_than_its_range_raises_short_file
    Tempfile.create(["short", ".narwhal-test"]) do |f|
      f.write("abc")
      f.flush
      @spool.append_file(f, 0, 10)
      assert_raises(Narwhal::SocketWriter::Spool::ShortFile) { @spool.flush_nonblock(@out) }
    end
  end

  def test_a_reader_gone_raises_from_flush
    @spool.append("x" * 100)
    @in.close
    assert_raises(Errno::EPIPE) { @spool.flush_nonblock(@out) }
  end
end
