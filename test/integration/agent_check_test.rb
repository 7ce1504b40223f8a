# frozen_string_literal: true

require "test_helper"
require "socket"
require "tmpdir"

# agent_listen end to end, read as haproxy's agent-check reads it (connect,
# read one line, closed): the weight falls as requests hold threads and
# wait in the listen queue, `drain` through a graceful TERM, and the port
# answering across USR2 with the old master's weight handed over to the
# new master's once, never back and forth, and never a drain.
class AgentCheckTest < Minitest::Test
  # /block holds its thread until the test creates the release file.
  APP = <<~'RU'
    release = ENV.fetch("RELEASE_FILE")
    run lambda { |env|
      if env["PATH_INFO"] == "/block"
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 30
        sleep 0.01 until File.exist?(release) || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      end
      [200, { "content-type" => "text/plain" }, ["ok"]]
    }
  RU

  # Checks the agent every 20 ms (a fast haproxy's pace) on a thread of its
  # own; #stop returns what each check got, in order: the line, or the
  # class of the error.
  class Checker
    def initialize(port)
      @port = port
      @seen = Queue.new
      @stop = false
    end

    def self.check(port)
      sock = TCPSocket.new("127.0.0.1", port)
      sock.wait_readable(5) ? sock.read : :no_answer
    rescue SystemCallError, IOError => e
      e.class
    ensure
      sock&.close
    end

    def start
      @thread = Thread.new do
        until @stop
          @seen << self.class.check(@port)
          sleep 0.02
        end
      end
      self
    end

    def count
      @seen.size
    end

    def stop
      @stop = true
      @thread.join(10)
      Array.new(@seen.size) { @seen.pop }
    end
  end

  def setup
    @tmp = Dir.mktmpdir("narwhal-agent")
    @release = File.join(@tmp, "release")
    @pid_path = File.join(@tmp, "narwhal.pid")
    @clients = []
  end

  def teardown
    @checker&.stop
    @clients.each { |c| c.close unless c.closed? }
    @extra_pids&.each { |pid| Process.kill(:KILL, pid) rescue nil } # rubocop:disable Style/RescueModifier
    @server&.stop
    FileUtils.rm_rf(@tmp)
  end

  def start(config, workers: 1)
    @agent_port = TCPServer.open("127.0.0.1", 0) { |s| s.local_address.ip_port }
    config = %(agent_listen "127.0.0.1:#{@agent_port}"\npid #{@pid_path.inspect}\n#{config})
    @server = Narwhal::ServerProcess.start(app: APP, config: config, workers: workers,
                                           env: { "RELEASE_FILE" => @release })
  end

  def check
    Checker.check(@agent_port)
  end

  def wait_for_line(line, timeout: 10)
    wait_until(timeout: timeout, message: "the agent to say #{line.inspect} (last: #{@last.inspect})") do
      (@last = check) == line
    end
  end

  def block
    sock = TCPSocket.new("127.0.0.1", @server.port)
    sock.write("GET /block HTTP/1.1\r\nhost: x\r\n\r\n")
    @clients << sock
  end

  # 2 workers x 2 threads: each request held takes a quarter, a request
  # waiting in the listen queue takes one more; never below 1% while a
  # worker serves.
  def test_the_weight_follows_threads_held_and_the_listen_queue
    start("worker_processes 2\nthreads 2\n", workers: 2)
    wait_for_line("up ready 100%\n")
    block
    wait_for_line("up ready 75%\n")
    2.times { block }
    wait_for_line("up ready 25%\n")
    2.times { block } # the fourth thread, and one request no worker accepts
    wait_for_line("up ready 1%\n")
    File.write(@release, "")
    wait_for_line("up ready 100%\n")
    assert_match(/agent listener on 127\.0\.0\.1:#{@agent_port} \(haproxy agent-check\)/, @server.log)
  end

  # From TERM on the agent says drain while the workers still serve for
  # drain_delay, then the port goes with the master: never ready again. A
  # check caught as the master exits may be reset, or closed before its
  # line: to haproxy, as a refused one, an agent that did not answer, which
  # changes nothing.
  def test_drain_through_a_graceful_term
    start("term_graceful true\ndrain_delay 2\n")
    wait_for_line("up ready 100%\n")
    @server.signal(:TERM)
    wait_for_line("drain\n")
    @checker = Checker.new(@agent_port).start
    assert_equal 200, @server.get("/").status, "still serving during drain_delay"
    assert @server.wait_exit(timeout: 20).success?, @server.log
    after = @checker.count
    wait_until(message: "checks after the master left") { @checker.count >= after + 5 }
    seen = @checker.stop.chunk_while { |a, b| a == b }.map(&:first)
    @checker = nil
    assert_equal "drain\n", seen.first, seen.inspect
    assert_equal Errno::ECONNREFUSED, seen.last, seen.inspect
    assert_empty seen - ["drain\n", Errno::ECONNREFUSED, Errno::ECONNRESET, ""], seen.inspect
  end

  # The old master answers with its weight from USR2 until the new
  # master's first worker serves, then only the new master answers (50%
  # while its second worker boots): the port is never refused nor silent,
  # and the instance is never drained by the deploy.
  def test_the_agent_port_answers_across_usr2_and_hands_over_once
    start("worker_processes 2\npreload_app true\n", workers: 2)
    old = @server.pid
    wait_for_line("up ready 100%\n")
    @checker = Checker.new(@agent_port).start
    wait_until(message: "checks before USR2") { @checker.count >= 5 }
    @server.signal(:USR2)
    new_pid = wait_until(timeout: 15, message: "new master") { (pid = read_pid(@pid_path)) && pid != old && pid }
    @extra_pids = [new_pid]
    wait_until(timeout: 20, message: "the old master yielding") { @server.log.include?("the new master answers on") }
    assert_match(/agent listener on 127\.0\.0\.1:#{@agent_port} inherited, answering once a worker serves/, @server.log)
    @server.signal(:QUIT)
    assert @server.wait_exit(timeout: 15).success?
    after = @checker.count
    wait_until(message: "checks after the old master left") { @checker.count >= after + 20 }
    seen = @checker.stop.chunk_while { |a, b| a == b }.map(&:first)
    @checker = nil
    assert_equal "up ready 100%\n", seen.first, seen.inspect
    assert_equal "up ready 100%\n", seen.last, seen.inspect
    assert_empty seen.grep_v(/\Aup ready (50|100)%\n\z/), "only weights, no drain: #{seen.inspect}"
    stop_new_master(new_pid)
  end

  private

  def stop_new_master(pid)
    Process.kill(:QUIT, pid)
    wait_until(timeout: 15, message: "the new master gone") { !alive?(pid) }
    @extra_pids = nil
  end

  # Not a zombie: an orphaned master is reaped by whoever adopted it.
  def alive?(pid)
    !File.read("/proc/#{pid}/stat").include?(") Z ")
  rescue Errno::ENOENT
    false
  end
end
