# frozen_string_literal: true

require "test_helper"
require "support/spool_reading"
require "socket"
require "tempfile"

# Narwhal::SocketWriter::Counting: the access log's count of the bytes a
# connection's responses took, sent or spooled, over a socket pair.
class SocketWriterCountingTest < Minitest::Test
  include Narwhal::SpoolReading

  BIG = 4 * 1024 * 1024 # more than a socket pair buffers

  def setup
    @budget = Narwhal::SocketWriter::SpoolBudget.new(64 * 1024 * 1024, 64 * 1024, disk_reserve: 0)
    @sock, @peer = UNIXSocket.pair
    @writer = nil
  end

  def teardown
    @writer&.discard_spool
    @sock.close unless @sock.closed?
    @peer.close unless @peer.closed?
  end

  # The access log's byte count: what the socket took and what waits in
  # the spool, strings and files alike, each byte once.
  def test_the_counting_writer_counts_sent_spooled_and_file_bytes
    writer = Narwhal::SocketWriter::Counting.new(@sock, 5, @budget)
    writer.write("head")
    Tempfile.create("narwhal-count") do |file|
      file.write("f" * BIG)
      file.flush
      assert_equal BIG, writer.write_file(file, BIG) # more than the socket takes: the rest spooled
      writer.write("tail")
      assert_equal BIG + 8, writer.sent
      assert writer.pending?
      @writer = writer # teardown drops the spool
      assert_equal "head#{'f' * BIG}tail", receive(BIG + 8)
    end
    refute Narwhal::SocketWriter.new(@sock, 5).respond_to?(:sent), "no counting without the log"
  end
end
