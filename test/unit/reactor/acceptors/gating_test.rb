# frozen_string_literal: true

require "test_helper"
require "support/reactor_harness"

# Narwhal::Reactor::Acceptors::Gating: what an AcceptGate (request threads) makes the acceptors do.
class ReactorAcceptorsGatingTest < Minitest::Test
  include Narwhal::ReactorHarness

  # Both threads hold a connection, a third waits in the listen queue, and
  # a sibling is to take it: the thread that comes back from its request
  # gets the listener's report and takes nothing. The listeners must leave
  # the set (the sibling, told so, stops leaving the crowd to this worker),
  # not come back ready to every thread at once, and return when there is
  # room again.
  def test_with_threads_a_worker_whose_crowd_share_is_taken_stops_listening_until_it_has_room
    gate = NoRoomGate.new
    @reactor = Narwhal::Reactor.new(Logger.new(@log), gate: gate)
    release = Queue.new
    @reactor.add_listener(@listener) { |sock| GatedHandler.new(sock, release).tap { |h| @handlers << h } }
    running_threads(2) do
      connect("one")
      connect("two")
      wait_for("both threads hold a connection") { @handlers.size == 2 && @handlers.all? { |h| h.threads.size == 1 } }
      connect("three")
      release << true # a thread comes back while the other still has its handler
      wait_for("the listeners left the set") { gate.listenings.last == false }
      assert_equal 2, @handlers.size, "no connection taken without room"
      gate.room = 1
      release << true
      wait_for("room again: the third is let in") { @handlers.size == 3 }
      3.times { release << true }
    end
  end
end
