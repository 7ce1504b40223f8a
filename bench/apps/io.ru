# frozen_string_literal: true

# io: every request waits 20 ms, as if on a database or another service.
IO_WAIT = 0.020

run lambda { |_env|
  sleep IO_WAIT
  [200, { "content-type" => "text/html" }, ["Hello, Rack!"]]
}
