# frozen_string_literal: true

require "test_helper"
require "socket"
require "tmpdir"

# The kernel's accept queue of TCP and Unix listen sockets, as /metrics
# shows it: it climbs with connections nobody accepted and falls as they
# are accepted.
class ListenQueueTest < Minitest::Test
  def setup
    @dir = Dir.mktmpdir("narwhal-queue")
    @tcp = TCPServer.new("127.0.0.1", 0)
    @tcp.listen(7)
    @unix = UNIXServer.new(File.join(@dir, "q.sock"))
    @unix.listen(9)
    @clients = []
    @queue = Narwhal::System::ListenQueue.new
  end

  def teardown
    (@clients + [@tcp, @unix]).each(&:close)
    FileUtils.rm_rf(@dir)
  end

  def depths
    @queue.depths([@tcp, @unix]).values_at(@tcp, @unix)
  end

  def test_depth_climbs_with_waiting_connections_and_falls_when_accepted
    assert_equal [[0, 7], [0, 9]], depths
    3.times { @clients << TCPSocket.new("127.0.0.1", @tcp.local_address.ip_port) }
    2.times { @clients << UNIXSocket.new(@unix.path) }
    wait_until(message: "3 and 2 queued") { depths == [[3, 7], [2, 9]] }
    @clients << @tcp.accept << @unix.accept
    assert_equal [[2, 7], [1, 9]], depths
  end

  def test_sockets_that_are_not_listening_are_left_out
    client = TCPSocket.new("127.0.0.1", @tcp.local_address.ip_port)
    @clients << client
    assert_nil @queue.tcp_depth(client)
    assert_equal [@tcp], @queue.depths([@tcp, client]).keys
    refute_includes @queue.unix_depths.keys, 0
  end
end
