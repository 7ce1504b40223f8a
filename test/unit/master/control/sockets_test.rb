# frozen_string_literal: true

require "test_helper"
require "logger"
require "socket"
require "stringio"

# The control thread's two sockets: an address another process still holds
# is bound once it is free while the other socket is served, and a forked
# worker keeps neither.
class ControlSocketsTest < Minitest::Test
  Control = Narwhal::Master::Control

  # What Status#to_h gives for one idle worker.
  class FakeStatus
    def to_h
      { "pid" => 1, "ready" => true, "draining" => false, "handing_over" => false, "ever_ready" => true,
        "boot_failures" => 0, "worker_processes" => 1, "threads" => 1, "listeners" => [], "events" => {},
        "workers" => [{ "state" => "idle", "threads" => 1, "busy_threads" => 0 }],
        "histogram_bounds" => Narwhal::Scoreboard::HISTOGRAM_BOUNDS }
    end
  end

  def setup
    @log = StringIO.new
    @logger = Logger.new(@log)
  end

  def teardown
    @control&.stop
    @blocker&.close
  end

  def agent_line(port)
    TCPSocket.open("127.0.0.1", port) { |s| s.wait_readable(5) && s.read }
  end

  def port_of(address)
    Integer(address.split(":").last)
  end

  # A USR2 successor whose control_listen changed to an address the old
  # master still holds: the agent is answered meanwhile.
  def test_a_busy_address_is_bound_once_free_while_the_other_socket_is_served
    @blocker = TCPServer.new("127.0.0.1", 0)
    busy = "127.0.0.1:#{@blocker.local_address.ip_port}"
    agent = Control::Agent.new("127.0.0.1:0", @logger)
    @control = Control.new(busy, FakeStatus.new, @logger, agent: agent).start(wait_if_busy: true)
    assert_nil @control.address
    assert_match(/control listener: cannot listen on #{busy}.*; binding once it is free/, @log.string)
    assert_equal "up ready 100%\n", agent_line(port_of(agent.address))
    @blocker.close
    wait_until(timeout: 5, message: "bound once free") { @control.address == busy }
    response = TCPSocket.open("127.0.0.1", port_of(busy)) do |s|
      s.write("GET /health HTTP/1.1\r\nhost: x\r\n\r\n")
      s.read
    end
    assert_match(%r{\AHTTP/1\.1 200 }, response)
  end

  def test_without_wait_a_busy_address_is_an_error
    @blocker = TCPServer.new("127.0.0.1", 0)
    agent = Control::Agent.new("127.0.0.1:#{@blocker.local_address.ip_port}", @logger)
    error = assert_raises(Narwhal::Listener::Error) { Control.new(nil, FakeStatus.new, @logger, agent: agent).start }
    assert_match(/already in use/, error.message)
  end

  # Once the master lets go of the agent socket nobody holds it: a worker
  # forked earlier must not keep it (haproxy would wait on a backlog no
  # one accepts from instead of being refused).
  def test_a_forked_child_lets_go_of_the_agent_socket
    agent = Control::Agent.new("127.0.0.1:0", @logger)
    @control = Control.new(nil, FakeStatus.new, @logger, agent: agent).start
    port = port_of(agent.address)
    ready_r, ready_w = IO.pipe
    pid = fork do
      @control.close_in_child
      ready_w.write(".")
      sleep 10
      exit!(0)
    end
    ready_w.close
    assert_equal ".", ready_r.read(1)
    @control.stop
    @control = nil
    assert_raises(Errno::ECONNREFUSED) { TCPSocket.new("127.0.0.1", port) }
  ensure
    if pid
      Process.kill(:KILL, pid)
      Process.wait(pid)
    end
  end
end
