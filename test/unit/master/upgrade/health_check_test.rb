# frozen_string_literal: true

require "test_helper"
require "rack"
require "rack/lint"

# upgrade_health_path in a new worker: the app called with GET PATH as a
# request on the worker's first listener would be, 200 or a boot error
# that says what the app answered.
class MasterUpgradeHealthCheckTest < Minitest::Test
  HealthCheck = Narwhal::Master::Upgrade::HealthCheck
  TEMPLATE = { "rack.errors" => $stderr, "rack.url_scheme" => "http", "SCRIPT_NAME" => "",
               "rack.version" => [1, 3], "rack.multithread" => false, "rack.multiprocess" => true,
               "rack.run_once" => false, "rack.hijack?" => true, "SERVER_SOFTWARE" => "Narwhal",
               "SERVER_NAME" => "127.0.0.1", "SERVER_PORT" => "8080" }.freeze

  def answer(status, seen = [])
    body = Object.new
    body.define_singleton_method(:each) { |&b| b.call("ok") }
    body.define_singleton_method(:close) { seen << :closed }
    lambda do |env|
      seen << env
      [status, { "content-type" => "text/plain" }, body]
    end
  end

  def test_200_passes_and_the_body_is_closed
    seen = []
    HealthCheck.new("/up").verify(answer(200, seen), TEMPLATE)
    env, closed = seen
    assert_equal :closed, closed
    assert_equal %w[GET /up 127.0.0.1:8080 127.0.0.1], env.values_at("REQUEST_METHOD", "PATH_INFO", "HTTP_HOST", "REMOTE_ADDR")
  end

  def test_anything_but_200_is_a_boot_error_saying_what_came
    e = assert_raises(Narwhal::BootError) { HealthCheck.new("/up").verify(answer(503), TEMPLATE) }
    assert_equal "upgrade_health_path: GET /up answered 503, not 200", e.message
    e = assert_raises(Narwhal::BootError) { HealthCheck.new("/up").verify(answer(301), TEMPLATE) }
    assert_equal "upgrade_health_path: GET /up answered 301, not 200", e.message
  end

  def test_an_app_that_raises_is_named_at_its_line
    app = ->(_env) { raise ArgumentError, "no database" }
    e = assert_raises(Narwhal::BootError) { HealthCheck.new("/up").verify(app, TEMPLATE) }
    assert_match(/\Aupgrade_health_path: GET \/up raised #{Regexp.escape(File.expand_path(__FILE__))}:\d+: no database \(ArgumentError\)\z/,
                 e.message)
  end

  # Host for Rails' host authorization, X-Forwarded-Proto for force_ssl.
  def test_headers_and_a_query_string_are_sent_as_given
    env = HealthCheck.new("/up?deep=1", { "Host" => "app.example", "X-Forwarded-Proto" => "https",
                                          "Content-Type" => "text/plain" }).env(TEMPLATE)
    assert_equal ["/up", "deep=1", "app.example", "https", "text/plain"],
                 env.values_at("PATH_INFO", "QUERY_STRING", "HTTP_HOST", "HTTP_X_FORWARDED_PROTO", "CONTENT_TYPE")
  end

  # The env is a valid Rack request (the Rack this bundle runs).
  def test_rack_lint_takes_the_request
    HealthCheck.new("/up", { "Host" => "app.example" }).verify(Rack::Lint.new(answer(200)), TEMPLATE)
  end
end
