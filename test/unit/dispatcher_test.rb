# frozen_string_literal: true

require "test_helper"
require "support/responding"

# Narwhal::Dispatcher: where a request runs; its parts load on first use and
# both dispatchers answer a Connection the same way.
class DispatcherTest < Minitest::Test
  include Narwhal::Responding

  def test_its_parts_load_on_first_use
    assert_kind_of Class, Narwhal::Dispatcher::Inline
    assert_kind_of Class, Narwhal::Dispatcher::Threaded
    assert_kind_of Class, Narwhal::Dispatcher::AcceptGate
    assert_kind_of Module, Narwhal::Dispatcher::ForkGuard
  end

  # What Connection asks of a dispatcher: #request_loop and #dispatch,
  # answered with Next's words.
  def test_both_dispatchers_answer_a_connection_alike
    threaded = Narwhal::Dispatcher::Threaded.new
    inline = Narwhal::Dispatcher::Inline.new(responder("x"))
    answers = [inline, threaded].map do |dispatcher|
      Thread.new do
        dispatcher.serve_here(responder("x", thread: 1)) if dispatcher.respond_to?(:serve_here)
        refute_nil dispatcher.request_loop
        [dispatcher.dispatch(request("/same")), body_received]
      end.value
    end
    assert_equal [[Narwhal::Next::KEEP, "x /same"]] * 2, answers
  end
end
