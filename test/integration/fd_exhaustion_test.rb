# frozen_string_literal: true

require "test_helper"
require "etc"

# A worker out of file descriptors stops accepting for a while instead of
# spinning on a listener that stays readable, logs that rarely, and takes
# connections again by itself once descriptors are free.
class FdExhaustionTest < Minitest::Test
  LIMIT = 64   # RLIMIT_NOFILE of the server
  HELD = 150   # connections held open: more than the worker can accept
  WINDOW = 2.5 # seconds watched while the worker is out of descriptors
  MAX_LINES = 10
  APP = "run ->(_env) { [200, { 'content-type' => 'text/plain' }, ['ok']] }\n"

  def now
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  # Seconds of CPU (user + system) the process used so far.
  def cpu_seconds(pid)
    fields = File.read("/proc/#{pid}/stat").split(") ", 2).last.split
    (Integer(fields[11]) + Integer(fields[12])) / Etc.sysconf(Etc::SC_CLK_TCK).to_f
  end

  def log_lines(server)
    server.log.count("\n")
  end

  def get_ok?(server)
    client = server.connect
    client.write("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    response = client.read_response(timeout: 3)
    response.status == 200 && response.body == "ok"
  rescue Timeout::Error, SystemCallError, EOFError
    false
  ensure
    client&.close
  end

  def test_a_worker_out_of_descriptors_backs_off_quietly_and_recovers
    # lowered in the master before it forks: the worker inherits the limit;
    # a worker_connections it cannot back (unset, the cap would keep the
    # worker within its descriptors)
    server = Narwhal::ServerProcess.start(app: APP,
                                          config: "Process.setrlimit(:NOFILE, #{LIMIT})\nworker_connections 1000\n")
    worker = server.worker_pids.first
    held = Array.new(HELD) { TCPSocket.new(server.host, server.port) }
    wait_until(timeout: 20, message: "the worker running out of descriptors") do
      server.log.match?(/too many open files/i)
    end

    lines = log_lines(server)
    cpu = cpu_seconds(worker)
    started = now
    # watched for the whole window: a spinning worker fails at the first look
    while (elapsed = now - started) < WINDOW
      grown = log_lines(server) - lines
      assert_operator grown, :<=, MAX_LINES, "the log grew by #{grown} lines in #{elapsed.round(2)}s"
      sleep 0.1
    end
    used = cpu_seconds(worker) - cpu
    assert_operator used, :<, WINDOW * 0.25, "the worker used #{used.round(2)}s of CPU in #{WINDOW}s"
    assert_match(/accept failed: too many open files \(limit #{LIMIT}/, server.log)

    held.each(&:close)
    held = []
    wait_until(timeout: 30, interval: 0.2, message: "a request answered once descriptors are free") do
      get_ok?(server)
    end
    assert_match(/accepting again after [\d.]+s of failed accepts/, server.log)
    assert_equal [worker], server.worker_pids, "the same worker serves: it never crashed"
  ensure
    held&.each(&:close)
    server&.stop
  end
end
