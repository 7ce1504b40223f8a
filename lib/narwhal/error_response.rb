# frozen_string_literal: true

module Narwhal
  # The short plain-text responses the server itself sends (bad requests,
  # limits, timeouts, app errors). They always close the connection.
  module ErrorResponse
    MESSAGES = {
      400 => "Bad Request", 408 => "Request Timeout", 413 => "Content Too Large",
      414 => "URI Too Long", 417 => "Expectation Failed",
      431 => "Request Header Fields Too Large", 500 => "Internal Server Error",
      505 => "HTTP Version Not Supported"
    }.freeze
    HEADERS = { "content-type" => "text/plain" }.freeze

    def self.bytes(status)
      head = ResponseHead.new
      buf = String.new(encoding: Encoding::BINARY)
      head.write(buf, status, HEADERS, ["#{MESSAGES.fetch(status, 'Error')}\n"], ResponseHead::REQ_HTTP11)
      buf
    end
  end
end
