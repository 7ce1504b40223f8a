# frozen_string_literal: true

# The demo app: `bundle exec narwhal examples/hello.ru`
run ->(_env) { [200, { "content-type" => "text/html" }, ["Hello, Rack!"]] }
