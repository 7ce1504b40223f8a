# frozen_string_literal: true

module Narwhal
  class Server
    # The request limits and client timeouts every connection of a serving
    # process reads (Connection::Context#limits, the C loop's parser), and
    # the longest a request may wait before it is started (queue_deadline,
    # seconds; nil: no limit), which the C loop and the Responder check.
    Limits = Struct.new(:body_buffer_size, :max_body_size, :max_request_line, :max_header_size,
                        :max_header_fields, :keepalive_timeout, :keepalive_requests, :client_header_timeout,
                        :client_body_timeout, :write_timeout, :queue_deadline, :keepalive_rebalance,
                        keyword_init: true) do
      # A frozen Limits from a configuration's directives.
      def self.from(config)
        new(body_buffer_size: config[:client_body_buffer_size], max_body_size: config[:client_max_body_size],
            max_request_line: config[:max_request_line], max_header_size: config[:max_header_size],
            max_header_fields: config[:max_header_fields], keepalive_timeout: config[:keepalive_timeout],
            keepalive_requests: config[:keepalive_requests], client_header_timeout: config[:client_header_timeout],
            client_body_timeout: config[:client_body_timeout], write_timeout: config[:write_timeout],
            queue_deadline: config[:queue_deadline], keepalive_rebalance: config[:keepalive_rebalance]).freeze
      end
    end
  end
end
