# frozen_string_literal: true

require "test_helper"
require_relative "../support/threads_client"
require "socket"

# Request threads hand each connection back to the reactor when they are
# done with it. These tests take connections through the rarer ways back:
# a hijacked socket the app closed, an app thread that ends itself, and a
# worker holding worker_connections when its connections turn idle.
class ThreadsHandoffTest < Minitest::Test
  include ThreadsClient

  # Paths:
  #   /pid             the worker's pid
  #   /hijack          takes the socket, answers on it and closes it, marks
  #                    "hijacked", then returns once "release-hijack" exists
  #   /hijack-keep     the same, but first opens a file that it keeps open:
  #                    it gets the descriptor number the socket had
  #   /exit-thread     ends the app thread (Thread.exit) in the middle of the request
  #   /block/NAME      marks "started-NAME", waits for "release-NAME"
  APP = <<~'RUBY'
    def wait_for(name)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 20
      sleep 0.005 until File.exist?(name) || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
    end
    run lambda { |env|
      case env["PATH_INFO"]
      when "/pid" then [200, { "content-type" => "text/plain" }, [Process.pid.to_s]]
      when "/hijack", "/hijack-keep"
        io = env["rack.hijack"].call
        io.write("HTTP/1.1 200 OK\r\ncontent-length: 8\r\nconnection: close\r\n\r\nhijacked")
        io.close
        ($kept ||= []) << File.open("kept", "w") if env["PATH_INFO"] == "/hijack-keep"
        File.write("hijacked", "")
        wait_for("release-hijack")
        [200, {}, []]
      when "/exit-thread" then Thread.exit
      when %r{\A/block/\w+\z}
        name = env["PATH_INFO"].delete_prefix("/block/") # not $1: threads share the lambda's $~
        File.write("started-#{name}", "")
        wait_for("release-#{name}")
        [200, { "content-type" => "text/plain" }, [name]]
      else [404, { "content-type" => "text/plain" }, ["no\n"]]
      end
    }
  RUBY

  def start(threads: 2, extra: "")
    @server = Narwhal::ServerProcess.start(app: APP, lint: false, config: "threads #{threads}\n#{extra}")
  end

  # The app closes the hijacked socket while its thread still runs; a new
  # connection then gets the same descriptor number. When the thread
  # returns, giving the hijacked connection up must not take the new one's
  # descriptor out of the reactor: its later requests would never be read.
  def test_a_connection_on_the_descriptor_a_hijacker_closed_keeps_being_served
    start
    hijacker = client
    assert_equal "hijacked", get(hijacker, "/hijack").body
    wait_until(message: "the app closed the hijacked socket") { mark?("hijacked") }
    fresh = client # accepted on the descriptor number the app just closed
    assert_equal 200, get(fresh, "/pid").status
    release("hijack")
    # the hijacking thread returns a few milliseconds after the release:
    # the fresh connection must be answered before, during and after it
    stop_at = now + 1
    count = 0
    while now < stop_at && count < 200
      count += 1
      assert_equal 200, get(fresh, "/pid", timeout: 5).status, "request #{count} after the release"
    end
  end

  # The descriptor number of the closed hijacked socket is a regular file's
  # when its thread returns: the worker must still let the connection go
  # (no internal error) and stop on QUIT.
  def test_a_hijacked_socket_number_reused_by_a_file_is_let_go
    start
    assert_equal "hijacked", get(client, "/hijack-keep").body
    wait_until(message: "the app closed the hijacked socket") { mark?("hijacked") }
    release("hijack")
    assert_equal 200, get(client, "/pid").status
    @server.signal(:QUIT)
    assert @server.wait_exit(timeout: 10).success?, "the worker and the master exit on QUIT"
    refute_match(/internal error/, @server.log)
  end

  # Thread.exit in the app runs no rescue: the thread that had the
  # connection must still give it back (closed), and the worker must keep
  # its threads and stop on QUIT.
  def test_an_app_thread_that_exits_loses_neither_its_connection_nor_a_thread
    start(threads: 2)
    quitter = client
    quitter.write("GET /exit-thread HTTP/1.1\r\nHost: t\r\n\r\n")
    assert quitter.closed?(timeout: 5), "the connection whose thread exited is closed"
    # both threads still serve: two requests at once
    a = client
    b = client
    a.write("GET /block/a HTTP/1.1\r\nHost: t\r\n\r\n")
    b.write("GET /block/b HTTP/1.1\r\nHost: t\r\n\r\n")
    wait_until(timeout: 5, message: "two requests in the app at once") { mark?("started-a") && mark?("started-b") }
    release("a")
    release("b")
    assert_equal %w[a b], [a, b].map { |c| c.read_response(timeout: 10).body }
    @server.signal(:QUIT)
    assert @server.wait_exit(timeout: 10).success?, "the worker and the master exit on QUIT"
  end

  # With worker_connections held by requests in the app, the worker stops
  # accepting. Once those connections are idle kept-alive ones, a new
  # client is served at once (the oldest idle connection makes room), not
  # after keepalive_timeout closed one; while none waits, they stay open.
  def test_a_full_worker_makes_room_once_its_connections_turn_idle
    start(threads: 2, extra: "worker_connections 2\nkeepalive_timeout 30\n")
    a = client
    b = client
    a.write("GET /block/a HTTP/1.1\r\nHost: t\r\n\r\n")
    wait_until(timeout: 5, message: "a in the app") { mark?("started-a") }
    b.write("GET /block/b HTTP/1.1\r\nHost: t\r\n\r\n")
    wait_until(timeout: 5, message: "b in the app") { mark?("started-b") }
    release("a")
    release("b")
    assert_equal %w[a b], [a, b].map { |c| c.read_response(timeout: 10).body }
    # with no client waiting, nothing needs room: both stay open (this
    # waits on purpose, for a few of the reactor's sweeps)
    sleep 0.75
    assert_equal [200, 200], [a, b].map { |x| get(x, "/pid").status }
    c = client
    t0 = now
    assert_equal 200, get(c, "/pid", timeout: 10).status
    assert_operator now - t0, :<, 2, "a new client waited for a kept-alive connection to time out"
  end

  # The same with the app on the reactor's thread (threads 1): both
  # connections are held while their heads are incomplete.
  def test_a_full_worker_without_threads_makes_room_once_its_connections_turn_idle
    start(threads: 1, extra: "worker_connections 2\nkeepalive_timeout 30\n")
    a = client
    a.write("GET /pid HTTP/1.1\r\n")
    b = client
    b.write("GET /pid HTTP/1.1\r\n")
    wait_until(timeout: 5, message: "both heads read") { [a, b].all? { |x| unread_bytes(x)&.zero? } }
    assert_equal [200, 200], [a, b].map { |x| x.write("Host: t\r\n\r\n").read_response(timeout: 10).status }
    c = client
    t0 = now
    assert_equal 200, get(c, "/pid", timeout: 10).status
    assert_operator now - t0, :<, 2, "a new client waited for a kept-alive connection to time out"
  end
end
