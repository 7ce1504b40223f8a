# frozen_string_literal: true

require "test_helper"
require "logger"

# The loop threads' keeper: a loop thread that ends after an immediate stop
# (#stop_waiting: #run returned and closed its wake-up pipe) ends quietly.
class ReactorThreadsTest < Minitest::Test
  FakeReactor = Struct.new(:finished, :closing) do
    def finished? = finished
    def closing? = closing
  end

  def test_a_thread_that_ends_while_run_closes_its_pipe_ends_without_an_error
    release = Thread::Queue.new
    threads = Narwhal::Reactor::Threads.new(1, Logger.new(StringIO.new), ->(_i) {}) { release.pop }
    loop_thread = nil
    # the thread ends (its app returns) right as #run closes the pipe's
    # reading end, before or after the writing end
    threads.instance_variable_get(:@wake_reader).define_singleton_method(:close) do
      super()
      release << :go
      loop_thread.join(5)
    rescue StandardError
      nil
    end
    others = Thread.list # another test's loop thread may still be ending
    keeper = Thread.new { threads.run(FakeReactor.new(false, true), {}) }
    wait_until(message: "the loop thread started") do
      loop_thread = (Thread.list - others).find { |t| t.name == "narwhal request 0" }
    end
    loop_thread.report_on_exception = false
    threads.stop_waiting
    keeper.join(5) or flunk("run did not return after stop_waiting")
    assert_equal :go, loop_thread.value
  end
end
