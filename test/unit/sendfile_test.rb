# frozen_string_literal: true

require "test_helper"

# Narwhal.sendfile_nonblock: sendfile(2) without blocking.
class SendfileTest < Minitest::Test
  def test_sendfile_nonblock_sends_a_file_range
    Tempfile.create("nw") do |f|
      f.write("0123456789")
      f.flush
      a, b = UNIXSocket.pair
      assert_equal 4, Narwhal.sendfile_nonblock(a.fileno, f.fileno, 3, 4)
      assert_equal "3456", b.read_nonblock(10)
      assert_equal 0, Narwhal.sendfile_nonblock(a.fileno, f.fileno, 10, 4), "0 at end of file"
    ensure
      a&.close
      b&.close
    end
  end
end
