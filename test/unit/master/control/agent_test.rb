# frozen_string_literal: true

require "test_helper"
require "logger"
require "socket"
require "stringio"

# The agent socket served by the control thread, over real loopback
# sockets: a line at once and the connection closed, clients that send or
# read nothing, and the hand-over between an old and a new master.
class ControlAgentTest < Minitest::Test
  Control = Narwhal::Master::Control
  Agent = Control::Agent

  # Status#to_h for one idle worker of 4 threads; `handing_over` for an
  # old master after USR2; `fail` for a status that cannot be read.
  class FakeStatus
    attr_accessor :handing_over, :busy, :fail

    def to_h
      raise Errno::ENOENT, "/proc/1/statm" if fail

      { "draining" => false, "handing_over" => handing_over || false, "ever_ready" => true, "boot_failures" => 0,
        "worker_processes" => 1, "threads" => 4, "listeners" => [],
        "workers" => [{ "state" => "busy", "threads" => 4, "busy_threads" => busy || 0 }] }
    end
  end

  def setup
    @log = StringIO.new
    @logger = Logger.new(@log)
    @status = FakeStatus.new
    @controls = []
    @sockets = []
  end

  def teardown
    @sockets.each { |s| s.close unless s.closed? }
    @controls.each(&:stop)
  end

  def serve(agent, status = @status)
    Control.new(nil, status, @logger, agent: agent).start.tap { |c| @controls << c }
  end

  def connect(address = @address)
    TCPSocket.new("127.0.0.1", Integer(address.split(":").last)).tap { |s| @sockets << s }
  end

  # One check as haproxy makes it: connect, read to the end.
  def check(address = @address)
    sock = connect(address)
    raise "no answer in 5s" unless sock.wait_readable(5)

    sock.read
  ensure
    sock&.close
  end

  def start_agent
    agent = Agent.new("127.0.0.1:0", @logger)
    serve(agent)
    @address = agent.address
    agent
  end

  def test_each_connection_gets_the_line_at_once_then_the_end
    start_agent
    assert_equal "up ready 100%\n", check
    @status.busy = 3
    assert_equal "up ready 25%\n", check, "read anew for each connection"
    assert_match(/agent listener on 127\.0\.0\.1:\d+ \(haproxy agent-check\)/, @log.string)
  end

  # What haproxy's agent-send writes first is not waited for, and clients
  # that never read do not hold the thread: each is answered and closed.
  def test_clients_that_send_or_never_read_do_not_hold_it
    start_agent
    sender = connect
    sender.write("backend/server\n")
    assert sender.wait_readable(5)
    assert_equal "up ready 100%\n", sender.read_nonblock(100)
    silent = Array.new(Control::MAX_CLIENTS + 8) { connect }
    assert_equal "up ready 100%\n", check, "answered past the client limit"
    silent.each { |s| assert_equal "up ready 100%\n", s.read }
  end

  # A status that cannot be read: no line (haproxy then changes nothing),
  # logged, and the next connection is answered.
  def test_a_status_that_raises_closes_without_a_line
    start_agent
    @status.fail = true
    assert_equal "", check
    assert_match(%r{agent: /proc/1/statm: no such file or directory}, @log.string)
    @status.fail = false
    assert_equal "up ready 100%\n", check
  end

  # USR2 in one process: the new master takes the socket and the
  # succession pipe as the exec would pass them (copies of the descriptors
  # here), answers once it starts, and the old master stops answering then;
  # if the new master dies, the old one answers again.
  def test_the_old_master_answers_until_the_new_one_starts_then_never
    old_agent = start_agent
    @status.handing_over = true
    assert_equal "up ready 100%\n", check, "the old master serves on while the new one boots"
    new_agent = Agent.take(@address, @logger, inherited_env(old_agent))
    assert new_agent.inherited?
    new_status = FakeStatus.new.tap { |s| s.busy = 1 }
    new_control = Control.new(nil, new_status, @logger, agent: new_agent)
    assert_equal "up ready 100%\n", check, "the new master answers only once started"
    new_control.start
    @controls << new_control
    wait_until(message: "the old master yields") { @log.string.include?("the new master answers on #{@address} now") }
    assert_equal ["up ready 75%\n"], Array.new(20) { check }.uniq
    @controls.delete(new_control).stop(unlink: false)
    @controls.first.take_back
    assert_equal "up ready 100%\n", check, "the old master again"
  end

  def test_take_with_no_address_closes_what_was_passed_down
    old_agent = start_agent
    env = inherited_env(old_agent)
    fds = env.values.map(&:to_i)
    assert_nil Agent.take(nil, @logger, env)
    assert_empty env
    fds.each { |fd| assert_raises(Errno::EBADF) { IO.for_fd(fd, autoclose: false).stat } }
  end

  private

  # The environment an exec'd new master finds: the descriptors of
  # pass_on_exec, as copies this process may close independently.
  def inherited_env(agent)
    env = {}
    agent.pass_on_exec(env)
    env.transform_values do |fd|
      IO.for_fd(Integer(fd), autoclose: false).dup.tap { |io| io.autoclose = false }.fileno.to_s
    end
  end
end
