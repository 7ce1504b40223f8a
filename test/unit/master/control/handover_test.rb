# frozen_string_literal: true

require "test_helper"

# The control socket passed from an old master to its USR2 successor.
class ControlHandoverTest < Minitest::Test
  Handover = Narwhal::Master::Control::Handover

  def setup
    @listener = Narwhal::Listener.new("127.0.0.1:0")
    @env = {}
  end

  def teardown
    @listener.close
  end

  def test_the_socket_passed_down_is_taken_when_it_is_the_configured_address
    map = Handover.pass_on_exec(@listener, @env)
    fd = @listener.io.fileno
    assert_equal({ fd => fd }, map)
    refute @listener.io.close_on_exec?, "it survives the exec"
    taken = Handover.take(@listener.address, @env)
    assert_equal @listener.address, taken.address
    assert_empty @env, "the variable is not passed on to the app"
  ensure
    # the same descriptor as @listener's, which teardown closes: left to the
    # garbage collector it would close whatever a later test opened there
    taken&.io&.autoclose = false
  end

  def test_a_changed_address_is_not_taken_and_its_descriptor_is_closed
    other = Narwhal::Listener.new("127.0.0.1:0")
    Handover.pass_on_exec(other, @env)
    fd = other.io.fileno
    assert_nil Handover.take("127.0.0.1:1", @env)
    assert_raises(Errno::EBADF) { IO.for_fd(fd, autoclose: false).stat }
  ensure
    other&.close
  end

  # control_listen removed before USR2: the socket passed down is closed.
  def test_one_passed_down_to_a_master_without_a_control_listener_is_closed
    other = Narwhal::Listener.new("127.0.0.1:0")
    Handover.pass_on_exec(other, @env)
    fd = other.io.fileno
    other.io.autoclose = false # take closes the descriptor itself
    assert_nil Handover.take(nil, @env)
    assert_empty @env
    assert_raises(Errno::EBADF) { IO.for_fd(fd, autoclose: false).stat }
  end

  def test_without_one_there_is_nothing_to_take
    assert_nil Handover.take("127.0.0.1:9394", @env)
  end
end
