# frozen_string_literal: true

require "test_helper"
require "support/reactor_harness"

# Narwhal::Reactor::Acceptors: when a reactor accepts (paused, backing off, at the connection limit) and what.
class ReactorAcceptorsTest < Minitest::Test
  include Narwhal::ReactorHarness

  def test_a_connection_the_loop_served_and_closed_ends_a_back_off
    @reactor.add_listener(@listener, ServingFactory.new(@server))
    running do
      client = connect
      assert client.wait_readable(5), "served once the back-off is over"
      assert_equal "served", client.read
    end
    assert_match(/accept failed: too many open files/, @log.string)
    assert_match(/accepting again after [\d.]+s of failed accepts/, @log.string)
  end

  def test_a_paused_reactor_accepts_nothing_until_resumed
    accept_with(%i[close])
    @reactor.pause_accepting
    connect("x")
    running do
      # a connection waits in the backlog: for half a second the loop must
      # not take it (this waits on purpose, to see nothing happen)
      deadline = Narwhal::Clock.now + 0.5
      sleep 0.01 while Narwhal::Clock.now < deadline && @handlers.empty?
      assert_empty @handlers, "accepted while paused"
      @reactor.resume_accepting
      wait_for("accepted once resumed") { @handlers.any? }
    end
  end

  def test_at_max_handlers_with_none_idle_accepting_waits_until_one_turns_idle
    @reactor = Narwhal::Reactor.new(Logger.new(@log), max_handlers: 1)
    accept_with(%i[keep keep keep], [])
    running do
      connect("a")
      wait_for("first") { @handlers.size == 1 }
      connect("b")
      sleep 0.05 # the second must wait in the listen queue
      assert_equal 1, @handlers.size
      @handlers.first.idle = true # its request done: kept alive, idle
      wait_for("room again: the second accepted (and read), the idle one closed") do
        @handlers.size == 2 && @handlers.first.calls.include?(:close) && @handlers.last.calls.include?(:readable)
      end
    end
  end
end
