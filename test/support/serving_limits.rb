# frozen_string_literal: true

# The limits and env template of the unit tests that serve requests
# through a Connection or the RequestLoop over real sockets.
module ServingLimits
  LIMITS = Narwhal::Server::Limits.new(body_buffer_size: 1024, max_body_size: 10_000, max_request_line: 1024,
                                       max_header_size: 4096, max_header_fields: 50, keepalive_timeout: 5,
                                       keepalive_requests: 100, client_header_timeout: 10,
                                       client_body_timeout: 3, write_timeout: 5).freeze
  TEMPLATE = { "rack.input" => Narwhal::Request::NullInput::INSTANCE, "SCRIPT_NAME" => "" }.freeze
end
