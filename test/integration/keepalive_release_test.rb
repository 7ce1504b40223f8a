# frozen_string_literal: true

require "test_helper"
require "support/worker_connections"

# A kept-alive connection idle for keepalive_release in a saturated worker
# (every thread busy, work waiting for it) while a sibling has an idle
# thread is handed to that sibling: the client keeps its connection
# (nothing on the wire says it moved), and its next request is served by
# the free worker instead of waiting behind the busy one. Nothing is
# closed, so no request can race a close.
class KeepaliveReleaseTest < Minitest::Test
  include Narwhal::WorkerConnections

  # /pid: which worker, and how long the request waited; /slow: 0.8 s of
  # work, each call leaving a numbered file the test waits for; /busy:
  # 0.1 s of work; /echo: the request's body.
  APP = <<~'RU'
    run lambda { |env|
      case env["PATH_INFO"]
      when "/slow"
        File.write("slow-#{Dir["slow-*"].size + 1}", "")
        sleep 0.8
      when "/busy" then sleep 0.1
      end
      body = env["PATH_INFO"] == "/echo" ? env["rack.input"].read : "#{Process.pid} #{env['narwhal.queue_time']}"
      [200, { "content-type" => "text/plain", "content-length" => body.bytesize.to_s }, [body]]
    }
  RU

  def setup
    @clients = []
  end

  def teardown
    @clients.each(&:close)
    @server&.stop
  end

  def start(threads:, extra: "")
    @threads = threads
    config = "worker_processes 2\nthreads #{threads}\ncontrol_listen '127.0.0.1:0'\n#{extra}"
    @server = Narwhal::ServerProcess.start(app: APP, workers: 2, config: config)
  end

  def test_a_saturated_worker_hands_its_idle_connection_to_an_idle_sibling
    [1, 2].each do |threads|
      start(threads: threads)
      idle, pid = saturate_a_worker
      wait_until(message: "threads #{threads}: a connection handed off", timeout: 10) { handed_off >= 1 }
      response = get(idle, "/pid")
      served_by, waited = response.body.split
      refute_equal pid, served_by, "threads #{threads}: served by the idle sibling"
      assert_operator Float(waited), :<, 0.3, "threads #{threads}: at once"
      assert_nil response.headers["connection"], "threads #{threads}: the connection persists"
      assert_equal served_by, get(idle, "/pid").body.split.first, "threads #{threads}: and stays there"
      finish_round
    end
  end

  # Four clients on one worker post every 0.3 s while two others keep
  # that worker saturated (/busy, 0.1 s each, back to back) and its
  # sibling idles: the four connections move while their clients send,
  # and every request is answered on the connection it was sent on, with
  # its own body.
  def test_connections_move_while_their_clients_send_and_no_request_is_lost
    start(threads: 1, extra: "keepalive_release 0.05\nkeepalive_rebalance nil\n")
    first, pid = connection_on_a_worker
    posting = [first] + Array.new(3) { connection_to(pid) }
    busy = Array.new(2) { connection_to(pid) }
    stop = false
    busy_loops = busy.map { |c| Thread.new { get(c, "/busy") until stop } }
    posts = posting.each_with_index.map { |c, i| Thread.new { post_until(c, i) { stop } } }
    wait_until(message: "the four connections handed off", timeout: 20) { handed_off >= 4 }
    stop = true
    busy_loops.each(&:join)
    answers = posts.flat_map(&:value)
    assert_operator answers.size, :>=, 8
    answers.each { |sent, got| assert_equal sent, got, "every request answered, with its own body" }
  end

  def test_a_worker_with_no_work_waiting_keeps_its_idle_connections
    start(threads: 1)
    idle, pid = connection_on_a_worker
    busy = connection_to(pid)
    busy.write("GET /slow HTTP/1.1\r\nHost: t\r\n\r\n")
    assert_equal 200, busy.read_response.status
    assert_equal pid, get(idle, "/pid").body.split.first, "no backlog: nothing is handed over"
  end

  def test_off_the_connection_stays_with_its_worker
    start(threads: 1, extra: "keepalive_release nil\nkeepalive_rebalance nil\n")
    idle, pid = saturate_a_worker
    # the worker looked at its idle connections before it started the waiting /slow
    wait_until(message: "the waiting /slow started", timeout: 10) { slow_started > @threads }
    served_by, waited = get(idle, "/pid").body.split
    assert_equal pid, served_by
    assert_operator Float(waited), :>, 0.3, "it waited behind the busy worker"
    assert_equal 0, handed_off
    @busy.each { |c| assert_equal 200, c.read_response.status }
  end

  private

  # One idle kept-alive connection on a worker whose threads all run
  # /slow, with one more /slow waiting for it: [connection, worker pid].
  def saturate_a_worker
    idle, pid = connection_on_a_worker
    busy = Array.new(@threads + 1) { connection_to(pid) }
    busy.first(@threads).each { |c| c.write("GET /slow HTTP/1.1\r\nHost: t\r\n\r\n") }
    wait_until(message: "every thread in /slow") { slow_started >= @threads }
    busy.last.write("GET /slow HTTP/1.1\r\nHost: t\r\n\r\n")
    @busy = busy
    [idle, pid]
  end

  # Posts on client every 0.3 s (its pace, not a synchronisation) until
  # the block says stop; [[body sent, body answered], ...].
  def post_until(client, index)
    answers = []
    until yield
      sleep 0.3
      body = "client=#{index} seq=#{answers.size}"
      client.write("POST /echo HTTP/1.1\r\nHost: t\r\ncontent-length: #{body.bytesize}\r\n\r\n#{body}")
      answers << [body, client.read_response(timeout: 10).body]
    end
    answers
  end

  def handed_off
    @server.control_get("/metrics").scan(/^narwhal_worker_connections_handed_off_total\{[^}]*\} (\d+)/)
           .sum { |(n)| Integer(n) }
  end

  def slow_started
    Dir[File.join(@server.dir, "slow-*")].size
  end

  def finish_round
    @busy.each { |c| assert_equal 200, c.read_response.status }
    @clients.each(&:close).clear
    @server.stop
    @server = nil
  end

end
