# frozen_string_literal: true

require "test_helper"
require "support/running_server"

# Narwhal::Server: a standalone serving process run in a thread: it binds
# the configured address, serves real requests over TCP, and stops on its
# signals, giving back the handlers it found.
class ServerTest < Minitest::Test
  include Narwhal::RunningServer

  APP = lambda do |env|
    [200, { "content-type" => "text/plain" },
     ["#{env['PATH_INFO']} multithread=#{env['rack.multithread']} hijack=#{env['rack.hijack?']} " \
      "#{env['SERVER_SOFTWARE']} #{env['REMOTE_ADDR']}"]]
  end

  def teardown
    stop_server_left_running
  end

  def test_standalone_binds_serves_and_stops_gracefully_on_quit
    mine = proc {}
    previous = Signal.trap("QUIT", mine)
    port = start(Narwhal::Server.standalone(APP, new_config))
    assert port, @log.string
    response = get(port, "/hello")
    assert_equal "200", response.code
    assert_equal "/hello multithread=false hijack=true Narwhal #{Narwhal::VERSION} 127.0.0.1", response.body
    stop("QUIT")
    assert_includes @log.string, "QUIT received: finishing requests in progress"
    assert_raises(Errno::ECONNREFUSED) { TCPSocket.new("127.0.0.1", port) }
    assert_same mine, Signal.trap("QUIT", previous), "the handler it found is back"
  ensure
    Signal.trap("QUIT", previous) if previous
  end

  def test_with_threads_requests_are_served_by_request_threads
    port = start(Narwhal::Server.standalone(APP, new_config(threads: 2)))
    bodies = Array.new(3) { |i| Thread.new { get(port, "/t#{i}").body } }.map(&:value)
    assert_equal 3.times.map { |i| "/t#{i} multithread=true hijack=true Narwhal #{Narwhal::VERSION} 127.0.0.1" }, bodies
    stop("QUIT")
  end

  # Standalone, INT is the loop's too (a worker's exits at once): kept-alive
  # clients are dropped at once.
  def test_int_stops_a_standalone_server_at_once
    port = start(Narwhal::Server.standalone(APP, new_config))
    client = TCPSocket.new("127.0.0.1", port)
    client.write("GET /kept HTTP/1.1\r\nHost: x\r\n\r\n")
    assert client.wait_readable(5)
    assert_match(%r{\AHTTP/1.1 200 OK\r\n}, client.readpartial(4096))
    stop("INT")
    assert_includes @log.string, "INT received: exiting now"
    assert client.wait_readable(5), "the kept-alive connection was closed"
    assert_nil client.read_nonblock(1, exception: false)
  ensure
    client&.close
  end

  def test_a_listen_address_it_cannot_bind_fails_run
    taken = TCPServer.new("127.0.0.1", 0)
    config = new_config
    config.settings[:listeners] = [["127.0.0.1:#{taken.addr[1]}", {}]]
    assert_raises(Narwhal::Listener::Error) { Narwhal::Server.standalone(APP, config).run }
  ensure
    taken&.close
  end
end
