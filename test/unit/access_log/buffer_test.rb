# frozen_string_literal: true

require "test_helper"
require_relative "../../support/access_log_lines"

# Whole lines gathered for one write(2): when they go out, the bound, and an
# exit in the middle of a flush.
class AccessLogBufferTest < Minitest::Test
  include Narwhal::AccessLogLines

  def test_lines_are_gathered_then_go_out_together
    log = writer(:combined)
    3.times { log.record(ENV_GET, 200, {}, 1, 0.1, nil) }
    assert_equal 0, File.size(@path), "gathered, not written one by one"
    @log.flush
    assert_equal 3, File.readlines(@path).size
  end

  def test_the_buffer_is_written_before_it_would_pass_its_bound
    log = writer(:combined)
    long = ENV_GET.merge("REQUEST_URI" => "/#{'a' * 10_000}")
    4.times { log.record(long, 200, {}, 1, 0.1, nil) } # 3 fit in 32 KiB
    assert_equal 3, File.readlines(@path).size
    log.record(ENV_GET.merge("REQUEST_URI" => "/#{'b' * 40_000}"), 200, {}, 1, 0.1, nil) # alone: past the bound
    assert_equal 5, File.readlines(@path).size
    assert(lines.all? { |l| COMBINED.match?(l) })
  end

  # INT/TERM's handler writes what waits, then exit!s. It may run while a
  # thread is inside a flush whose write(2) is already done: on the same
  # thread (the handler interrupts it) or on another (it holds the lock).
  # Each line is written once.
  def test_an_exit_during_a_flush_writes_each_line_once
    written = []
    buffer = nil
    exit_during_write = lambda do |bytes|
      written << bytes.dup
      buffer.flush_at_exit if written.size == 1
    end
    buffer = Narwhal::AccessLog::Buffer.new(exit_during_write, 1024)
    buffer << "one\n"
    buffer.flush
    assert_equal ["one\n"], written
  end

  # The flush on another thread, stopped inside its write(2) with the lock
  # held: a Fiber plays it (a Mutex belongs to the fiber that locked it),
  # so no native thread is made (the parser's AddressSanitizer run loads
  # this file, and ASan trips over the signal stack of a Ruby thread that
  # ends).
  def test_an_exit_while_another_thread_flushes_writes_each_line_once
    written = []
    flusher = nil
    out = lambda do |bytes|
      written << bytes.dup
      Fiber.yield :wrote if Fiber.current.equal?(flusher) # its write(2) done, the lock still held
    end
    buffer = Narwhal::AccessLog::Buffer.new(out, 1024)
    buffer << "one\n"
    flusher = Fiber.new { buffer.flush }
    assert_equal :wrote, flusher.resume
    buffer.flush_at_exit
    flusher.resume
    assert_equal ["one\n"], written
  end

  # Whatever the lengths, the lines come out whole, in order, each write
  # within the bound unless it is one line longer than the bound.
  def test_every_write_is_whole_lines_within_the_bound
    writes = []
    buffer = Narwhal::AccessLog::Buffer.new(->(bytes) { writes << bytes.dup }, 64)
    random = Random.new(20_261_127)
    sent = Array.new(200) { |i| "#{i}:#{'x' * random.rand(0..90)}\n" }
    sent.each { |line| buffer << line }
    buffer.flush
    assert_equal sent.join, writes.join
    writes.each do |bytes|
      assert bytes.end_with?("\n"), "a write ends with a whole line: #{bytes.inspect}"
      assert bytes.bytesize <= 64 || bytes.count("\n") == 1, "#{bytes.bytesize} bytes in one write"
    end
    assert writes.any? { |bytes| bytes.bytesize > 64 }, "some lines were longer than the bound"
  end

  def test_a_long_line_goes_out_after_the_lines_that_waited
    writes = []
    buffer = Narwhal::AccessLog::Buffer.new(->(bytes) { writes << bytes.dup }, 16)
    buffer << "short\n"
    buffer << "#{'y' * 20}\n"
    assert_equal ["short\n", "#{'y' * 20}\n"], writes
    buffer.flush
    assert_equal 2, writes.size, "nothing waits any more"
  end

  # The exit handler with no flush under way: what waits is written, and
  # nothing when nothing waits.
  def test_flush_at_exit_writes_what_waits
    writes = []
    buffer = Narwhal::AccessLog::Buffer.new(->(bytes) { writes << bytes.dup }, 1024)
    buffer.flush_at_exit
    assert_empty writes
    buffer << "a\n"
    buffer << "b\n"
    buffer.flush_at_exit
    assert_equal ["a\nb\n"], writes
  end
end
