# frozen_string_literal: true

require "test_helper"
require "support/reactor_harness"

# Narwhal::Reactor::Watching: a pipe's readability runs its block in the
# loop (one thread), and an unwatched pipe runs nothing more.
class ReactorWatchingTest < Minitest::Test
  include Narwhal::ReactorHarness

  def setup
    super
    @pipe_r, @pipe_w = IO.pipe
    accept_with # a listener keeps the loop running
  end

  def teardown
    super
    [@pipe_r, @pipe_w].each { |io| io.close unless io.closed? }
  end

  def test_a_readable_pipe_runs_its_block_in_the_loop
    seen = Queue.new
    @reactor.watch(@pipe_r) { seen << [@pipe_r.read_nonblock(16), Thread.current] }
    running do
      @pipe_w.write("HUP")
      wait_for("the block ran") { seen.size == 1 }
    end
    bytes, thread = seen.pop
    assert_equal "HUP", bytes
    refute_equal Thread.current, thread, "run on the loop's thread"
  end

  def test_an_unwatched_pipe_runs_nothing
    calls = 0
    @reactor.watch(@pipe_r) do
      calls += 1
      @pipe_r.read_nonblock(16)
      @reactor.unwatch(@pipe_r)
    end
    running do
      @pipe_w.write("1")
      wait_for("the first byte seen") { calls == 1 }
      @pipe_w.write("2")
      # a connection served meanwhile shows the loop went on past the byte
      connect("x")
      wait_for("the loop served a connection since") { @handlers.any? }
    end
    assert_equal 1, calls
  end
end
