# frozen_string_literal: true

require "test_helper"
require_relative "../support/threads_client"
require "socket"

# The accept gate of a worker with a busy thread leaves a new connection
# to a sibling with more idle threads, but only to one that can take it.
class ThreadsGateTest < Minitest::Test
  include ThreadsClient

  APP = ThreadsClient::BLOCKING_APP

  # The pid of the worker holding the server's end of the client's
  # connection (found by socket inode), nil while none accepted it.
  def holder(client)
    server_port = format("%04X", @server.port)
    client_port = format("%04X", client.sock.local_address.ip_port)
    fields = File.foreach("/proc/net/tcp").map(&:split).find do |f|
      f[1].end_with?(":#{server_port}") && f[2].end_with?(":#{client_port}")
    end
    return nil if fields.nil? || fields[9] == "0"

    link = "socket:[#{fields[9]}]"
    @server.worker_pids.find do |pid|
      Dir.children("/proc/#{pid}/fd").any? do |fd|
        File.readlink("/proc/#{pid}/fd/#{fd}") == link
      rescue SystemCallError
        false
      end
    end
  end

  # One worker holds worker_connections clients that send their heads
  # slowly: its threads are idle, but it accepts nothing. The other, with
  # a thread busy, must not wait for it to take new connections.
  def test_a_busy_worker_does_not_defer_to_a_sibling_that_cannot_accept
    @server = Narwhal::ServerProcess.start(
      app: APP, workers: 2,
      config: "worker_processes 2\nthreads 2\nworker_connections 2\nclient_header_timeout 30\n"
    )
    slow = Hash.new { |h, k| h[k] = [] }
    20.times do
      c = client
      c.write("GET /pid HTTP/1.1\r\n")
      pid = wait_until(message: "the slow client accepted") { holder(c) }
      slow[pid] << c
      break if slow[pid].size == 2
    end
    full, = slow.find { |_, held| held.size == 2 }
    assert full, "one worker holds two slow clients: #{slow.transform_values(&:size)}"
    slow.each { |pid, held| held.each(&:close) unless pid == full }
    busy = client
    busy.write("GET /block/x HTTP/1.1\r\nHost: t\r\n\r\n")
    wait_until(message: "a thread of the other worker busy") { File.exist?(File.join(@server.dir, "started-x")) }
    refute_equal full, holder(busy)
    took = Array.new(7) do
      t0 = now
      c = client
      c.write("GET /pid HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
      assert_equal 200, c.read_response(timeout: 10).status
      now - t0
    end
    # deferring to the full worker costs Dispatcher::AcceptGate::PENDING_GRACE (0.1 s) each
    assert_operator took.sort[3], :<, 0.08, "median time to a response, of #{took.map { |t| t.round(3) }}"
  ensure
    File.write(File.join(@server.dir, "release-x"), "") if @server
  end
end
