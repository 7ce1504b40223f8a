# frozen_string_literal: true

require "test_helper"
require "support/reactor_harness"

# Narwhal::Reactor::Load: how busy a reactor is (connections held, reports
# no thread waits for, a crowd), read while its loop runs.
class ReactorLoadTest < Minitest::Test
  include Narwhal::ReactorHarness

  def test_handler_count_is_the_connections_held
    accept_with(%i[keep close], %i[keep close])
    assert_equal 0, @reactor.handler_count
    first = connect("a")
    connect("b")
    running do
      wait_for("both held") { @reactor.handler_count == 2 }
      first.close
      wait_for("one closed") { @reactor.handler_count == 1 }
    end
  end

  def test_with_one_thread_it_is_never_crowded
    accept_with([], [], [])
    running do
      3.times { connect("x") }
      wait_for("three held") { @reactor.handler_count == 3 }
      refute @reactor.crowded?, "no request threads: no crowd"
    end
  end

  # Request threads: a connection a thread has is not a crowd; the
  # thread back in epoll_wait is not either.
  def test_with_threads_connections_each_with_a_thread_are_no_crowd
    @reactor = Narwhal::Reactor.new(Logger.new(@log), gate: OpenGate.new)
    release = Queue.new
    @reactor.add_listener(@listener) { |sock| GatedHandler.new(sock, release).tap { |h| @handlers << h } }
    running_threads(1) do
      connect("one")
      wait_for("the thread is in the request") { @handlers.first&.threads&.size == 1 }
      assert_equal 1, @reactor.handler_count
      refute @reactor.crowded?, "its one connection has the thread"
      release << true
      wait_for("the connection kept, the thread waiting again: no crowd") { !@reactor.crowded? }
    end
  end
end
