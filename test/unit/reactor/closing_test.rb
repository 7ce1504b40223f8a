# frozen_string_literal: true

require "test_helper"
require "support/reactor_harness"

# Narwhal::Reactor::Closing: handlers closed past their deadline (the sweep) and to make room at the connection limit.
class ReactorClosingTest < Minitest::Test
  include Narwhal::ReactorHarness

  def test_a_passed_deadline_calls_on_timeout_and_its_answer_is_done
    accept_with([], deadline: Narwhal::Clock.now - 1)
    connect
    run_until("timed out and closed") { @handlers.first&.calls&.include?(:close) }
    assert_equal %i[timeout close], @handlers.first.calls - [:readable]
  end

  # The sweep read a deadline that had passed, but before it could claim the
  # connection its thread served a request and set a new one: the
  # connection is not timed out, and stays armed for its next request.
  def test_with_threads_the_sweep_times_out_only_what_is_still_past_its_deadline
    @reactor = Narwhal::Reactor.new(Logger.new(@log), gate: OpenGate.new)
    refreshed = Class.new(FakeHandler) do
      attr_reader :looks

      def deadline
        @looks = (@looks || 0) + 1
        @looks == 1 ? Narwhal::Clock.now - 1 : Narwhal::Clock.now + 60 # moved on once looked at
      end
      def awaiting_first_request? = false
    end
    @reactor.add_listener(@listener) { |sock| refreshed.new(sock).tap { |h| @handlers << h } }
    client = connect("one")
    running_threads(2) do
      wait_for("swept twice", timeout: 5) { @handlers.first&.looks.to_i >= 3 }
      refute_includes @handlers.first.calls, :timeout
      client.write("two")
      wait_for("read again: still armed") { @handlers.first.calls.count(:readable) == 2 }
    end
  end

  def test_at_max_handlers_the_oldest_idle_connection_makes_room
    @reactor = Narwhal::Reactor.new(Logger.new(@log), max_handlers: 2)
    accept_with([], [], [], idle: true)
    running do
      connect("a")
      wait_for("first") { @handlers.size == 1 }
      connect("b")
      wait_for("second") { @handlers.size == 2 }
      connect("c")
      # and the third registered (read): the test stops the loop from another
      # thread, which must not happen in the middle of an accept
      wait_for("third, and the oldest idle closed") do
        @handlers.size == 3 && @handlers.first.calls.include?(:close) && @handlers.last.calls.include?(:readable)
      end
      refute_includes @handlers[1].calls, :close
    end
  end
end
