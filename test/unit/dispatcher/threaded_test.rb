# frozen_string_literal: true

require "test_helper"
require "support/responding"

# Narwhal::Dispatcher::Threaded: each loop thread runs the requests it reads with its own Responder.
class DispatcherThreadedTest < Minitest::Test
  include Narwhal::Responding

  def test_each_thread_answers_with_the_responder_it_was_given
    dispatcher = Narwhal::Dispatcher::Threaded.new
    answers = Array.new(2) do |i|
      Thread.new do
        dispatcher.serve_here(responder("thread #{i}", thread: i))
        [dispatcher.dispatch(request("/r#{i}")), body_received]
      end.value
    end
    assert_equal [[:keep, "thread 0 /r0"], [:keep, "thread 1 /r1"]], answers
  end

  def test_the_request_loop_is_this_threads
    dispatcher = Narwhal::Dispatcher::Threaded.new
    loops = Array.new(2) do |i|
      Thread.new do
        dispatcher.serve_here(responder("t", thread: i))
        dispatcher.request_loop
      end.value
    end
    refute_nil loops[0]
    refute_same loops[0], loops[1]
  end
end
