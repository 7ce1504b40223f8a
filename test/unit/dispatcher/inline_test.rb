# frozen_string_literal: true

require "test_helper"
require "support/responding"

# Narwhal::Dispatcher::Inline: a request runs on the thread that read it, with the one Responder.
class DispatcherInlineTest < Minitest::Test
  include Narwhal::Responding

  def test_a_request_is_answered_on_this_thread_and_its_outcome_returned
    thread = nil
    app = lambda do |_env|
      thread = Thread.current
      [200, {}, ["here"]]
    end
    slot = @board.thread_slot(0, 0)
    dispatcher = Narwhal::Dispatcher::Inline.new(Narwhal::Responder.new(app, Logger.new(@log), slot, FakeCounters.new))
    assert_equal :keep, dispatcher.dispatch(request)
    assert_same Thread.current, thread
    assert_equal "here", body_received
    assert_equal :close, dispatcher.dispatch(request(keepalive: false))
  end

  def test_the_request_loop_is_the_responders
    with_loop = responder("a")
    assert_same with_loop.request_loop, Narwhal::Dispatcher::Inline.new(with_loop).request_loop
    refute_nil with_loop.request_loop
    logged = responder("b", access_log: Object.new)
    assert_nil Narwhal::Dispatcher::Inline.new(logged).request_loop,
               "with an access log every request goes through Ruby"
  end
end
