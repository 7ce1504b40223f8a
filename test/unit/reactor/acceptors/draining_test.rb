# frozen_string_literal: true

require "test_helper"
require "support/reactor_harness"

# Narwhal::Reactor::Acceptors::Draining: a graceful stop, with or without taking what waits in the listen queue.
class ReactorAcceptorsDrainingTest < Minitest::Test
  include Narwhal::ReactorHarness

  def test_retire_leaves_idle_handlers_until_their_deadline_then_run_returns
    accept_with([], idle: true, deadline: Narwhal::Clock.now + 3)
    connect("x")
    thread = Thread.new { @reactor.run }
    wait_for("accepted") { @handlers.any? }
    let_go = false
    @reactor.retire(drain: true) { let_go = true }
    wait_for("the listeners let go: nothing waits to be accepted") { let_go }
    refute_includes @handlers.first.calls, :close, "an idle connection may have a request on its way"
    assert thread.join(10), "the loop ends once no handler is left"
    assert_equal %i[readable timeout close], @handlers.first.calls
  ensure
    @reactor.close_all
    thread&.join(5)
  end

  def test_retire_without_drain_takes_nothing_more_another_process_serves_the_queue
    accept_with(%i[close])
    @reactor.pause_accepting
    connect("x")
    thread = Thread.new { @reactor.run }
    @reactor.retire
    assert thread.join(10), "the loop ends with no handler"
    assert_empty @handlers
    waiting = @server.accept_nonblock(exception: false)
    refute_equal :wait_readable, waiting, "the connection is still in the listen queue"
    waiting.close
  ensure
    @reactor.close_all
    thread&.join(5)
  end

  def test_retire_takes_what_waits_in_the_listen_queue_before_letting_go_of_the_listeners
    accept_with(%i[close], %i[close], %i[close])
    @reactor.pause_accepting
    3.times { connect("x") }
    thread = Thread.new { @reactor.run }
    taken_before_let_go = nil
    @reactor.retire(drain: true) { taken_before_let_go = @handlers.size }
    assert thread.join(10), "the loop ends once the queue is drained and no handler is left"
    assert_equal 3, taken_before_let_go, "every waiting connection taken first"
    assert(@handlers.all? { |h| h.calls == %i[readable close] })
  ensure
    @reactor.close_all
    thread&.join(5)
  end

  # Connections that arrive once the drain began are not its to take:
  # clients that keep connecting would keep it from ever ending.
  def test_retire_takes_only_what_the_listen_queue_held_when_it_began
    accept_with(%i[close], %i[close], %i[close], %i[close], %i[close])
    @reactor.pause_accepting
    3.times { connect("x") }
    wait_for("3 connections queued") { Narwhal::System::ListenQueue.new.depths([@server])[@server]&.first == 3 }
    taken_before_let_go = nil
    @reactor.retire(drain: true) { taken_before_let_go = @handlers.size }
    2.times { connect("x") }
    thread = Thread.new { @reactor.run }
    assert thread.join(10), "the loop ends once the 3 are served"
    assert_equal 3, taken_before_let_go
    assert_equal 3, @handlers.size, "the 2 that came later were left in the queue"
  ensure
    @reactor.close_all
    thread&.join(5)
  end
end
