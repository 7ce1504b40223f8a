# frozen_string_literal: true

require "test_helper"
require "support/worker_connections"

# Kept-alive connections do not pin requests to a busy worker: a request
# that waited on its kept-alive connection while its worker was busy with
# another one is answered with Connection: close, so that its client (a
# proxy's pooled connection) reconnects and the kernel gives the new
# connection to a free worker. A request that did not wait keeps its
# connection.
class KeepalivePinningTest < Minitest::Test
  include Narwhal::WorkerConnections

  # /pid: which worker; /slow: 0.5 s of work.
  APP = <<~'RU'
    run lambda { |env|
      if env["PATH_INFO"] == "/slow"
        File.write("slow", "") # the test waits for it
        sleep 0.5
      end
      body = "#{Process.pid} #{env['narwhal.queue_time']}"
      [200, { "content-type" => "text/plain", "content-length" => body.bytesize.to_s }, [body]]
    }
  RU

  def setup
    @clients = []
  end

  # access_log: every request read and served in Ruby; without, the C loop.
  # keepalive_release off: the pinned connection, idle long enough, would
  # be handed to the idle worker before its response (keepalive_release_test).
  def start(access_log:)
    log = access_log ? "access_log 'access.log'\n" : ""
    @server = Narwhal::ServerProcess.start(app: APP, workers: 2,
                                           config: "worker_processes 2\nkeepalive_release nil\n#{log}")
  end

  def teardown
    @clients.each(&:close)
    @server&.stop
  end

  # Two kept-alive connections held by the same worker.
  def two_connections_on_one_worker
    first, pid = connection_on_a_worker
    [first, connection_to(pid)]
  end

  def test_a_request_that_waited_behind_a_busy_worker_gets_connection_close
    [false, true].each do |access_log|
      start(access_log: access_log)
      assert_released_when_pinned
      @clients.each(&:close).clear
      @server.stop
      @server = nil
    end
  end

  def test_off_the_connection_stays
    @server = Narwhal::ServerProcess.start(app: APP, workers: 2, config: "worker_processes 2\nkeepalive_rebalance nil\n")
    busy, pinned = two_connections_on_one_worker
    busy.write("GET /slow HTTP/1.1\r\nHost: t\r\n\r\n")
    wait_until(message: "/slow in the app") { File.exist?(File.join(@server.dir, "slow")) }
    assert_nil get(pinned, "/pid").headers["connection"]
  end

  private

  def assert_released_when_pinned
    busy, pinned = two_connections_on_one_worker
    busy.write("GET /slow HTTP/1.1\r\nHost: t\r\n\r\n")
    wait_until(message: "/slow in the app") { File.exist?(File.join(@server.dir, "slow")) }
    response = get(pinned, "/pid") # waits for /slow: its worker is busy, the other idle
    assert_operator Float(response.body.split.last), :>, 0.2, "it waited"
    assert_equal "close", response.headers["connection"], "released to reconnect elsewhere"
    assert pinned.closed?
    assert_equal 200, busy.read_response.status
    assert_nil get(busy, "/pid").headers["connection"], "a request that did not wait keeps its connection"
  end
end
