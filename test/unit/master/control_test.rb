# frozen_string_literal: true

require "test_helper"
require "support/control_listener_client"
require "logger"
require "socket"
require "stringio"

# The master's control listener on its own: routes, answers, and clients
# that misbehave (silent, slow, oversized, not HTTP) while others are served.
class ControlTest < Minitest::Test
  Control = Narwhal::Master::Control

  # What Status#to_h gives, for a server with one idle worker.
  class FakeStatus
    attr_accessor :ready, :draining

    def initialize
      @ready = true
      @draining = false
    end

    def to_h
      { "pid" => 1, "ready" => @ready, "draining" => @draining, "worker_processes" => 1, "threads" => 1,
        "workers" => [], "listeners" => [], "events" => {},
        "histogram_bounds" => Narwhal::Scoreboard::HISTOGRAM_BOUNDS }
    end
  end

  include Narwhal::ControlListenerClient

  def status
    @status ||= FakeStatus.new
  end

  # After USR2 the old master lets go of a socket its successor answers on
  # too: a probe it already took is answered, not dropped.
  def test_a_hand_over_answers_the_probes_already_taken
    taken = connect.write("GET /ready HTTP/1.1\r\n")
    assert_equal 200, get("/health").status # answered after the first was accepted (one queue, in order)
    stopping = Thread.new { @control.stop(unlink: false, hand_over: true) }
    sleep 0.05 until stopping.status == "sleep" || !stopping.alive? # stop waits for the probe
    taken.write("host: x\r\n\r\n")
    assert_equal [200, "ready\n"], taken.read_response.then { |r| [r.status, r.body] }
    assert stopping.join(5), "stop returns once the probe is answered"
  end

  def test_routes_and_methods
    assert_equal [200, "ok\n"], get("/health").then { |r| [r.status, r.body] }
    assert_equal [200, "ready\n"], get("/ready?verbose=1").then { |r| [r.status, r.body] }
    metrics = get("/metrics")
    assert_equal Narwhal::Master::Control::Metrics::CONTENT_TYPE, metrics["content-type"]
    assert_includes metrics.body, "# TYPE narwhal_workers gauge"
    assert_equal %({"pid":1,"ready":true), get("/status").body[0, 21]
    assert_equal 404, get("/").status
    assert_equal 404, get("/metrics/x").status
    response = get("/ready", method: "DELETE")
    assert_equal [405, "GET, HEAD"], [response.status, response["allow"]]
    assert_equal "close", response["connection"]
  end

  # A status that cannot be read (a bug, /proc gone) costs that one
  # answer a 500, logged; the listener goes on answering.
  def test_a_status_that_raises_is_answered_500_and_the_listener_goes_on
    def @status.to_h = raise(Errno::ENOENT, "/proc/1/status")
    answer = get("/status")
    assert_equal [500, "internal error\n"], [answer.status, answer.body]
    assert_match(%r{control GET /status: /proc/1/status: no such file or directory\n.*in .to_h.}, @log.string)
    assert_equal 200, get("/health").status, "still answering"
  end

  def test_ready_says_why_not
    @status.ready = false
    assert_equal [503, "not ready: no worker serving\n"], get("/ready").then { |r| [r.status, r.body] }
    @status.draining = true
    assert_equal [503, "not ready: draining\n"], get("/ready").then { |r| [r.status, r.body] }
    assert_equal 200, get("/health").status, "the master still runs"
  end

  def test_more_clients_than_it_holds_drop_the_oldest
    held = Array.new(Control::MAX_CLIENTS) { connect }
    wait_until(message: "all held") { held.first.sock.write("") && true }
    assert_equal 200, get("/health").status
    assert held.first.closed?(timeout: 5), "the oldest silent client made room"
  end

  # A worker forked while the control thread had just accepted a
  # connection (not noted yet) must not keep that client waiting.
  def test_a_forked_child_lets_go_of_every_control_connection
    control = Control.new("127.0.0.1:0", @status, Logger.new(@log))
    control.send(:bind) # no thread: this test accepts in its place
    port = Integer(control.address.split(":").last)
    noted = TCPSocket.new("127.0.0.1", port)
    stray = TCPSocket.new("127.0.0.1", port)
    @sockets.push(noted, stray)
    wait_until(message: "noted") { control.send(:accept) || control.instance_variable_get(:@clients).any? }
    caught = wait_until(message: "caught") do
      io = control.instance_variable_get(:@listener).io.accept_nonblock(exception: false)
      io unless io == :wait_readable
    end
    ready_r, ready_w = IO.pipe
    pid = fork do
      control.close_in_child
      ready_w.write(".")
      sleep 10
      exit!(0)
    end
    ready_w.close
    assert_equal ".", ready_r.read(1)
    caught.close
    control.stop
    assert Narwhal::RawClient.new(noted).closed?(timeout: 2), "the noted connection is closed in the child"
    assert Narwhal::RawClient.new(stray).closed?(timeout: 2), "so is the one the child caught mid-accept"
  ensure
    if pid
      Process.kill(:KILL, pid)
      Process.wait(pid)
    end
  end

  def test_a_busy_address_is_an_error_unless_asked_to_wait
    error = assert_raises(Narwhal::Listener::Error) do
      Control.new(@control.address, @status, Logger.new(@log)).start
    end
    assert_match(/already in use/, error.message)
    waiting = Control.new(@control.address, @status, Logger.new(@log)).start(wait_if_busy: true)
    assert_nil waiting.address, "not bound while the address is taken"
    address = @control.address
    @control.stop
    wait_until(timeout: 10, message: "bound once free") { waiting.address == address }
    @control = waiting
    assert_equal 200, get("/health").status
  end
end
