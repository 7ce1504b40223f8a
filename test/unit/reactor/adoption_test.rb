# frozen_string_literal: true

require "test_helper"
require "support/reactor_harness"

# Narwhal::Reactor::Adoption: accepted sockets joining the reactor, read at once, or closed when epoll refuses them.
class ReactorAdoptionTest < Minitest::Test
  include Narwhal::ReactorHarness

  def test_an_accepted_socket_is_read_at_once_and_close_is_done_by_the_reactor
    accept_with(%i[close])
    connect("hello")
    run_until("the handler was read and closed") { @handlers.first&.calls == %i[readable close] }
  end

  # With threads, a connection epoll refuses once its first request was
  # read is closed: the gate must not count it as a new connection that
  # claims a thread.
  def test_with_threads_a_connection_epoll_refuses_is_not_counted_as_accepted
    gate = OpenGate.new
    @reactor = Narwhal::Reactor.new(Logger.new(@log), gate: gate)
    poller = @reactor.instance_variable_get(:@poller)
    @reactor.instance_variable_set(:@poller, RefusingPoller.new(poller, Errno::ENOMEM.new, @server.fileno))
    fresh = Class.new(FakeHandler) { def awaiting_first_request? = true }
    @reactor.add_listener(@listener) { |sock| fresh.new(sock).tap { |h| @handlers << h } }
    connect("a")
    running_threads(1) do
      wait_for("read, then closed") { @handlers.first&.calls == %i[readable close] }
    end
    assert_empty gate.seen
  end

  [Errno::ENOMEM, Errno::ENOSPC].each do |error|
    define_method("test_a_socket_epoll_refuses_(#{error.name.split('::').last})_is_closed_and_the_loop_goes_on") do
      poller = @reactor.instance_variable_get(:@poller)
      @reactor.instance_variable_set(:@poller, RefusingPoller.new(poller, error.new, @server.fileno))
      accept_with(%i[keep], %i[close])
      refused = connect("a")
      running do
        assert refused.wait_readable(10), "the refused client hears from the server"
        closed = begin
          refused.read_nonblock(1, exception: false).nil?
        rescue Errno::ECONNRESET # it had sent bytes we never read
          true
        end
        assert closed, "closed, not left open"
        assert_equal [%i[readable close]], @handlers.map(&:calls), "its request was read, then the handler closed"
        connect("b")
        wait_for("the next connection is served") { @handlers.size == 2 && @handlers.last.calls == %i[readable close] }
      end
      assert_match(/accept failed: .*#{Regexp.escape(error.new.message)}.*; pausing accepts/i, @log.string)
    end
  end
end
