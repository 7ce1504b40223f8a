# frozen_string_literal: true

# hello: the smallest Rack response.
run ->(_env) { [200, { "content-type" => "text/html" }, ["Hello, Rack!"]] }
