# frozen_string_literal: true

require "test_helper"
require "stringio"

# config.ru to a Rack app, with rackup's default middleware for RACK_ENV
# (unless -N or `default_middleware false`), and the errors of a file or
# library that does not load.
class AppBuilderTest < Minitest::Test
  APP = <<~RUBY
    run ->(env) { env["PATH_INFO"] == "/boom" ? raise("boom") : [200, { "content-type" => "text/plain" }, ["hi"]] }
  RUBY

  def setup
    @dir = Dir.mktmpdir("narwhal-app")
    @ru = File.join(@dir, "config.ru")
    File.write(@ru, APP)
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def env(path)
    { "REQUEST_METHOD" => "GET", "PATH_INFO" => path, "SCRIPT_NAME" => "", "QUERY_STRING" => "",
      "SERVER_NAME" => "x", "SERVER_PORT" => "80", "SERVER_PROTOCOL" => "HTTP/1.1", "HTTP_HOST" => "x",
      "rack.input" => StringIO.new("".b), "rack.errors" => $stderr, "rack.url_scheme" => "http",
      # what Rack 2.2's Lint still requires
      "rack.version" => [1, 6], "rack.multithread" => false, "rack.multiprocess" => false, "rack.run_once" => false }
  end

  # [status, body, what went to stderr] for a GET of path, the app built
  # by the block (inside the capture: the logger is the $stderr of then).
  def get(path)
    status = body = nil
    _, err = capture_io do
      status, _headers, chunks = yield.call(env(path))
      body = +""
      chunks.each { |chunk| body << chunk }
      chunks.close if chunks.respond_to?(:close)
    end
    [status, body, err]
  end

  def build(rack_env, **options)
    with_env("RACK_ENV" => rack_env) { Narwhal::AppBuilder.new(@ru, **options).call }
  end

  # development: every request logged (CommonLogger), an exception shown
  # as a page (ShowExceptions), the app and server checked by Rack::Lint.
  def test_development_logs_requests_shows_exceptions_and_lints
    status, body, err = get("/") { build("development") }
    assert_equal [200, "hi"], [status, body]
    assert_match(%r{"GET / HTTP/1\.1" 200}, err)
    status, body, = get("/boom") { build("development") }
    assert_equal 500, status
    assert_includes body, "boom"
    # a server's env that breaks the spec (rack.input not binary): Lint says so
    linted = ->(e) { build("development").call(e.merge("rack.input" => StringIO.new(+"text"))) }
    status, body, = get("/") { linted }
    assert_equal 500, status
    assert_includes body, "Rack::Lint::LintError"
  end

  def test_deployment_logs_requests_and_production_adds_nothing
    assert_match(%r{"GET / HTTP/1\.1" 200}, get("/") { build("deployment") }.last)
    assert_equal [200, "hi", ""], get("/") { build("production") }
    assert_raises(RuntimeError) { build("production").call(env("/boom")) }
  end

  # -N (no config file can undo it) and the config file's default_middleware false.
  def test_without_default_middleware_development_adds_nothing
    assert_equal [200, "hi", ""], get("/") { build("development", allow_default_middleware: false) }
    builder = Narwhal::AppBuilder.new(@ru)
    builder.default_middleware = false
    refute builder.default_middleware?
    assert_equal [200, "hi", ""], get("/") { with_env("RACK_ENV" => "development") { builder.call } }
    no_flag = Narwhal::AppBuilder.new(@ru, allow_default_middleware: false)
    no_flag.default_middleware = true
    refute no_flag.default_middleware?, "-N wins over the config file"
  end

  def test_a_missing_rackup_file_or_library_and_a_broken_app_are_boot_errors
    e = assert_raises(Narwhal::BootError) { Narwhal::AppBuilder.new(File.join(@dir, "nope.ru")).call }
    assert_equal "rackup file #{@dir}/nope.ru not found", e.message
    e = assert_raises(Narwhal::BootError) { Narwhal::AppBuilder.new(@ru, requires: ["nosuchlib-narwhal"]).call }
    assert_equal "-r nosuchlib-narwhal: cannot load such file -- nosuchlib-narwhal", e.message
    File.write(@ru, "x = 1\nrun Appp\n")
    e = assert_raises(Narwhal::BootError) { build("production") }
    assert_match(/config\.ru:2\b.*Appp/, e.message)
  end

  # A library given with -r is loaded before the app, which can use it.
  def test_required_libraries_load_before_the_app
    File.write(File.join(@dir, "greeting.rb"), "GREETING_FOR_NARWHAL_TEST = 'hello'\n")
    File.write(@ru, "run ->(_env) { [200, {}, [GREETING_FOR_NARWHAL_TEST]] }\n")
    assert_equal [200, "hello", ""], get("/") { build("production", requires: [File.join(@dir, "greeting.rb")]) }
  end
end
