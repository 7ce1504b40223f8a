# frozen_string_literal: true

require "test_helper"
require_relative "../support/threads_client"
require "socket"
require "json"

# A HUP may lower `threads` (not raise it: the scoreboard has a sub-slot
# per thread the master started with). Workers then read their siblings'
# idle threads from a scoreboard with more sub-slots than threads.
class ThreadsReloadTest < Minitest::Test
  include ThreadsClient

  APP = ThreadsClient::BLOCKING_APP

  # Kept-alive connections, e.g. want [4, 2]: four to one worker and two
  # to the other.
  def connections_on_two_workers(want)
    by_pid = Hash.new { |h, k| h[k] = [] }
    60.times do
      c = client
      by_pid[get(c, "/pid").body.to_i] << c
      first, second = by_pid.values.sort_by(&:size).reverse
      break if first && second && first.size >= want[0] && second.size >= want[1]
    end
    first, second = by_pid.values.sort_by(&:size).reverse
    assert first && second && first.size >= want[0] && second.size >= want[1],
           "kept-alive connections on both workers: #{by_pid.transform_values(&:size)}"
    [first.first(want[0]), second.first(want[1])]
  end

  # Both workers have every thread busy and requests wait on one: nothing
  # is shed, since no sibling can take them (a sub-slot beyond the worker's
  # threads must not count as an idle thread).
  def test_after_a_reload_to_fewer_threads_full_workers_shed_nothing
    @server = Narwhal::ServerProcess.start(app: APP, workers: 2, config: "worker_processes 2\nthreads 4\n")
    old = @server.worker_pids
    File.write(File.join(@server.dir, "narwhal.conf.rb"), "worker_processes 2\nthreads 2\n")
    @server.signal(:HUP)
    wait_until(timeout: 20, message: "two new workers ready") do
      (pids = @server.worker_pids).size == 2 && (pids & old).empty? && @server.log.scan(/worker=\d+ ready/).size >= 4
    end
    on_a, on_b = connections_on_two_workers([4, 2])
    %w[a0 a1].zip(on_a).each { |name, c| c.write("GET /block/#{name} HTTP/1.1\r\nHost: t\r\n\r\n") }
    %w[b0 b1].zip(on_b).each { |name, c| c.write("GET /block/#{name} HTTP/1.1\r\nHost: t\r\n\r\n") }
    wait_until(message: "both threads of both workers busy") { %w[a0 a1 b0 b1].all? { |n| mark?("started-#{n}") } }
    on_a[2].write("GET /pid HTTP/1.1\r\nHost: t\r\n\r\n")
    on_a[3].write("GET /pid HTTP/1.1\r\nHost: t\r\n\r\n")
    wait_until(message: "both requests at the server, waiting") { on_a[2..3].all? { |c| unread_bytes(c)&.positive? } }
    release("a0")
    first = on_a[2].read_response(timeout: 10)
    assert_equal 200, first.status
    assert_nil first["connection"], "shed while every thread of the sibling was busy"
    %w[a1 b0 b1].each { |n| release(n) }
    assert_equal [200] * 5, [on_a[3], on_a[0], on_a[1], *on_b].map { |c| c.read_response(timeout: 10).status }
  end

  # The control listener counts the threads the workers have now, not the
  # number the master started with.
  def test_after_a_reload_to_fewer_threads_metrics_and_status_count_the_new_threads
    @server = Narwhal::ServerProcess.start(app: APP, config: "control_listen \"127.0.0.1:0\"\nthreads 16\n")
    control = wait_until(message: "the control listener's address") { @server.log[/control listener on (\S+)/, 1] }
    old = @server.worker_pids
    File.write(File.join(@server.dir, "narwhal.conf.rb"), "control_listen \"#{control}\"\nthreads 4\n")
    @server.signal(:HUP)
    status = wait_until(timeout: 20, message: "the new worker serving") do
      s = JSON.parse(control_get(control, "/status"))
      s if s["workers"].size == 1 && !old.include?(s["workers"][0]["pid"]) && s["workers"][0]["state"] == "idle"
    end
    assert_equal 4, status["threads"]
    assert_equal 4, status["workers"][0]["threads"]
    assert_includes control_get(control, "/metrics").lines, %(narwhal_threads{state="idle"} 4\n)
  end

  def control_get(address, path)
    host, port = address.split(":")
    c = Narwhal::RawClient.new(TCPSocket.new(host, Integer(port)))
    c.write("GET #{path} HTTP/1.1\r\nhost: x\r\n\r\n")
    c.read_response(timeout: 10).body
  ensure
    c&.close
  end
end
