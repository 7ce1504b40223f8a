# frozen_string_literal: true

require "test_helper"
require "support/running_server"

# Narwhal::Server::Stopping: how a serving process stops (QUIT, a
# retirement after a soft timeout, the master gone), seen by its clients
# and in its log.
class ServerStoppingTest < Minitest::Test
  include Narwhal::RunningServer

  def teardown
    stop_server_left_running
    @listeners&.close
  end

  # A standalone server is the last to listen: what waits in its listen
  # queue when QUIT comes is served before it lets go of the listener.
  def test_a_graceful_stop_serves_the_listen_queue_first
    entered = Queue.new
    release = Queue.new
    app = lambda do |env|
      if env["PATH_INFO"] == "/slow"
        entered << true
        release.pop
      end
      [200, {}, [env["PATH_INFO"]]]
    end
    port = start(Narwhal::Server.standalone(app, new_config(keepalive_timeout: 1))) # idle: closed at its deadline
    slow = Thread.new { get(port, "/slow").body }
    entered.pop # the only thread is in the app: the next connection waits in the listen queue
    queued = TCPSocket.new("127.0.0.1", port)
    queued.write("GET /queued HTTP/1.1\r\nHost: x\r\n\r\n")
    Process.kill("QUIT", Process.pid) # taken by the loop once the slow request is done
    release << true
    assert_equal "/slow", slow.value
    assert queued.wait_readable(10)
    answer = queued.read
    assert_match(%r{\AHTTP/1.1 200 OK\r\n.*\r\n\r\n/queued\z}m, answer, "served, then closed as the server stopped")
    assert @thread.join(10), "run returned"
    assert_includes @log.string, "listen queue taken, listeners let go of"
  ensure
    queued&.close
  end

  def worker_server(app, retire:, **settings)
    config = new_config(**settings)
    @listeners = Narwhal::Listener::Set.new(config.logger, env: {})
    @listeners.open([["127.0.0.1:0", {}]], default: "127.0.0.1:0")
    server = Narwhal::Server.new(app, config, listeners: @listeners.to_a, retire: retire)
    [server, @listeners.first.address.split(":").last.to_i]
  end

  SLOW_ONCE = lambda do |env|
    sleep 5 if env["PATH_INFO"] == "/slow"
    [200, {}, [env["PATH_INFO"]]]
  end

  # The master was told and starts a replacement: this worker serves on.
  def test_after_a_soft_timeout_a_worker_asks_to_be_replaced_and_serves_on
    asked = 0
    server, port = worker_server(SLOW_ONCE, retire: -> { (asked += 1).positive? }, soft_timeout: 0.2)
    start(server)
    assert_equal "503", get(port, "/slow").code
    wait_until(message: "the retirement logged") { @log.string.include?("retiring after a soft timeout: serving on") }
    assert_equal "/next", get(port, "/next").body, "still serving"
    assert_equal 1, asked
    stop("QUIT")
  end

  # The master could not be told: the worker stops accepting and exits.
  def test_after_a_soft_timeout_a_worker_that_cannot_be_replaced_stops
    server, port = worker_server(SLOW_ONCE, retire: -> { false }, soft_timeout: 0.2)
    start(server)
    assert_equal "503", get(port, "/slow").code
    assert @thread.join(10), "run returned on its own"
    assert_includes @log.string, "retiring after a soft timeout: finishing requests in progress, then exiting"
  end

  # A worker whose master dies stops (and, with no master to enforce
  # `timeout`, would end itself past it): a child process, stopped by pid
  # if it does not end.
  def test_a_worker_whose_master_is_gone_stops
    reader, writer = IO.pipe
    log = Tempfile.create("server-log")
    config = new_config
    config.settings[:logger] = Logger.new(log.path)
    @listeners = Narwhal::Listener::Set.new(config.logger, env: {})
    @listeners.open([["127.0.0.1:0", {}]], default: "127.0.0.1:0")
    pid = fork do
      writer.close
      Narwhal::Server.new(->(_) { [200, {}, ["ok"]] }, config, listeners: @listeners.to_a, master_pipe: reader).run
      exit!(0)
    end
    reader.close
    wait_until(message: "the child serving") { File.read(log.path).include?("serving pid=#{pid}") }
    writer.close # the master's end: gone
    deadline = Narwhal::Clock.now + 10
    status = nil
    status = Process.wait2(pid, Process::WNOHANG)&.last until status || Narwhal::Clock.now > deadline || !sleep(0.01)
    assert status, "the child stopped"
    assert_equal 0, status.exitstatus
    assert_includes File.read(log.path), "master is gone: finishing requests in progress, then exiting"
  ensure
    if pid && !status
      Process.kill(:KILL, pid)
      Process.wait(pid)
    end
    writer&.close unless writer&.closed?
    log&.close
  end
end
