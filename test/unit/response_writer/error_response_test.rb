# frozen_string_literal: true

require "test_helper"

# Narwhal::ResponseWriter::ErrorResponse: the server's own short plain-text answers, which always close.
class ResponseWriterErrorResponseTest < Minitest::Test
  ERRORS = Narwhal::ResponseWriter::ErrorResponse

  def without_date(bytes)
    bytes.sub(/^date: [^\r]*\r\n/, "")
  end

  def test_an_error_is_a_plain_text_response_that_closes
    assert_equal "HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\ncontent-length: 12\r\n" \
                 "connection: close\r\n\r\nBad Request\n", without_date(ERRORS.bytes(400))
    assert_match(/^date: \w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT\r\n/, ERRORS.bytes(400))
  end

  def test_every_known_status_says_its_reason_in_the_status_line_and_the_body
    ERRORS::MESSAGES.each do |status, message|
      bytes = ERRORS.bytes(status)
      assert bytes.start_with?("HTTP/1.1 #{status} #{message}\r\n"), bytes
      assert bytes.end_with?("\r\n\r\n#{message}\n"), bytes
      assert_equal message.bytesize + 1, ERRORS.body_bytesize(status)
      assert_includes bytes, "\r\ncontent-length: #{message.bytesize + 1}\r\n"
    end
  end

  def test_to_head_the_same_head_without_the_body
    get = without_date(ERRORS.bytes(503))
    head = without_date(ERRORS.bytes(503, head: true))
    assert_equal get.delete_suffix("Service Unavailable\n"), head
    assert_equal 0, ERRORS.body_bytesize(503, head: true)
  end

  def test_an_unlisted_status_says_error
    bytes = without_date(ERRORS.bytes(418))
    assert bytes.start_with?("HTTP/1.1 418 \r\n"), bytes
    assert bytes.end_with?("connection: close\r\n\r\nError\n"), bytes
    assert_equal 6, ERRORS.body_bytesize(418)
  end

  def test_the_bytes_are_binary_and_new_each_time
    first = ERRORS.bytes(500)
    assert_equal Encoding::BINARY, first.encoding
    refute_same first, ERRORS.bytes(500)
    refute first.frozen?
  end
end
