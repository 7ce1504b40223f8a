# frozen_string_literal: true

require "test_helper"
# rackup 2 on Rack 3; Rack 2.2 has its own Rack::Handler
begin
  require "rackup/handler"
  require "rackup/handler/narwhal"
rescue LoadError
  require "rack/handler"
  require "rack/handler/narwhal"
end

# The handler `rackup -s narwhal` and `rails server -u narwhal` find: its
# options, a config it cannot take, and a master serving the app rackup
# built (in a forked child: the handler's process is the master).
class NarwhalRackHandlerTest < Minitest::Test
  HANDLERS = defined?(Rackup::Handler) ? Rackup::Handler : Rack::Handler
  Handler = HANDLERS::Narwhal

  def setup
    @dir = Dir.mktmpdir("narwhal-handler")
  end

  def teardown
    if @master_pid
      Process.kill(:KILL, @master_pid)
      Process.wait(@master_pid)
    end
    FileUtils.rm_rf(@dir)
  end

  def test_rackup_finds_it_by_name
    assert_same Handler, HANDLERS.get("narwhal")
    assert_kind_of Narwhal::RackHandler, Handler
  end

  def test_valid_options_name_the_lookup_and_the_defaults
    options = Handler.valid_options
    assert_equal ["config_file=PATH", "Host=HOST", "Port=PORT"], options.keys
    assert_includes options["config_file=PATH"], "$NARWHAL_CONFIG, else config/narwhal.rb"
    assert_includes options["Host=HOST"], "127.0.0.1"
    assert_includes options["Port=PORT"], "8080"
  end

  def test_a_config_it_cannot_take_stops_rackup_with_every_problem
    conf = File.join(@dir, "narwhal.rb")
    File.write(conf, "frobnicate\nworkers 2\n")
    _, err = capture_io do
      error = assert_raises(SystemExit) { Handler.run(->(_) {}, config_file: conf, Host: "127.0.0.1", Port: 0) }
      refute error.success?
    end
    assert_equal "narwhal: #{conf}:1: unknown directive frobnicate\n" \
                 "narwhal: #{conf}:2: workers is a Puma directive: use worker_processes 2\n", err
  end

  # The app as rackup built it, served by forked workers with no middleware
  # of narwhal's own; QUIT ends the master with status 0.
  def test_the_master_serves_the_app_rackup_built
    port = TCPServer.new("127.0.0.1", 0).then { |s| s.addr[1].tap { s.close } }
    log = File.join(@dir, "server.log")
    app = ->(env) { [200, { "content-type" => "text/plain" }, ["built by rackup #{env['PATH_INFO']}"]] }
    @master_pid = fork do
      Dir.chdir(@dir) # no config/narwhal.rb here
      $stderr.reopen(log, "a")
      %w[NARWHAL_CONFIG WEB_CONCURRENCY].each { |name| ENV.delete(name) }
      status = Handler.run(app, Host: "127.0.0.1", Port: port)
      exit!(status == 0 ? 0 : 1)
    end
    body = wait_until(message: "the app served") { fetch(port, "/hello") }
    assert_equal "built by rackup /hello", body
    Process.kill(:QUIT, @master_pid)
    _, status = Process.wait2(@master_pid)
    @master_pid = nil
    assert status.success?, File.read(log)
    text = File.read(log)
    assert_includes text, "no config file (-O config_file, NARWHAL_CONFIG or #{File.realpath(@dir)}/config/narwhal.rb)"
    assert_includes text, "before forking: workers share it, as with preload_app true"
  end

  # The body of a GET, nil while nothing answers.
  def fetch(port, path)
    sock = TCPSocket.new("127.0.0.1", port)
    sock.write("GET #{path} HTTP/1.0\r\n\r\n")
    response = Narwhal::RawClient.new(sock).read_response
    response.body if response.status == 200
  rescue Errno::ECONNREFUSED, Errno::ECONNRESET, EOFError
    nil
  ensure
    sock&.close
  end
end
