# frozen_string_literal: true

require "test_helper"

# Narwhal::Request::Input: a request body taken out of its framing, kept in memory or
# a temporary file, and what it says when it cannot be stored.
class InputTest < Minitest::Test
  def parse_head(parser, request)
    env = {}
    buf = request.b
    off = parser.execute(env, buf, 0)
    assert parser.head_done?
    [env, buf, off]
  end

  def new_parser
    Narwhal::HttpParser.new.configure(1024, 4096, 20, 1 << 20)
  end

  def test_content_length_body_taken_in_pieces_stops_at_its_length
    input = Narwhal::Request::Input.new(1024, 5)
    assert_equal 3, input.take(nil, {}, "hel".b, 0)
    refute input.complete?
    assert_equal 2, input.take(nil, {}, "loGET /next".b, 0)
    assert input.complete?
    assert_equal "hello", input.to_io.read
  end

  def test_chunked_body_is_announced_by_its_decoded_length
    parser = new_parser
    env, buf, off = parse_head(parser, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" \
                                       "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
    assert_equal "chunked", env["HTTP_TRANSFER_ENCODING"]
    input = Narwhal::Request::Input.new(1024)
    assert_equal buf.bytesize, input.take(parser, env, buf, off)
    assert input.complete?
    assert_equal "5", env["CONTENT_LENGTH"]
    refute env.key?("HTTP_TRANSFER_ENCODING")
    assert_equal "abcde", input.to_io.read
  end

  def test_body_over_the_memory_limit_goes_to_a_file
    input = Narwhal::Request::Input.new(4, 10)
    input.take(nil, {}, "0123456789".b, 0)
    io = input.to_io
    assert_kind_of File, io
    assert_equal "0123456789", io.read
  ensure
    input&.close
  end

  def test_storage_errors_say_where_how_far_and_why
    no_room = Narwhal::Request::Input::StorageError.new("writing", "/srv/tmp", Errno::ENOSPC.new("io_write"), 4096)
    assert_equal 507, no_room.status
    assert_equal "writing a temporary file in /srv/tmp failed after 4096 bytes: No space left on device (ENOSPC)",
                 no_room.message
    assert_equal 507, Narwhal::Request::Input::StorageError.new("writing", "/t", Errno::EDQUOT.new, 0).status
    assert_equal 507, Narwhal::Request::Input::StorageError.new("writing", "/t", Errno::EFBIG.new, 0).status
    cannot_open = Narwhal::Request::Input::StorageError.new("opening", "/srv/tmp", Errno::EACCES.new("rb_sysopen - /srv/tmp"))
    assert_equal 500, cannot_open.status
    assert_equal "opening a temporary file in /srv/tmp failed: Permission denied (EACCES)", cannot_open.message
  end
end
