# frozen_string_literal: true

module Narwhal
  class ResponseWriter
    # The short plain-text responses the server itself sends (bad requests,
    # limits, timeouts, app errors, no room for a request body). They always
    # close the connection.
    module ErrorResponse
      MESSAGES = {
        400 => "Bad Request", 408 => "Request Timeout", 413 => "Content Too Large",
        414 => "URI Too Long", 417 => "Expectation Failed",
        431 => "Request Header Fields Too Large", 500 => "Internal Server Error",
        503 => "Service Unavailable", 504 => "Gateway Timeout", 505 => "HTTP Version Not Supported", 507 => "Insufficient Storage"
      }.freeze
      HEADERS = { "content-type" => "text/plain" }.freeze

      # head: the request was HEAD (the same head as for GET, without the
      # body); headers: more of them (Retry-After)
      def self.bytes(status, head: false, headers: nil)
        flags = head ? ResponseHead::REQ_HTTP11 | ResponseHead::REQ_HEAD : ResponseHead::REQ_HTTP11
        buf = String.new(encoding: Encoding::BINARY)
        ResponseHead.new.write(buf, status, headers ? HEADERS.merge(headers) : HEADERS,
                               ["#{MESSAGES.fetch(status, 'Error')}\n"], flags)
        buf
      end

      # The bytes of the body of #bytes (the access log's count).
      def self.body_bytesize(status, head: false)
        head ? 0 : MESSAGES.fetch(status, "Error").bytesize + 1
      end
    end
  end
end
