# frozen_string_literal: true

require "test_helper"
require "support/notify_socket"

# NOTIFY_SOCKET as systemd sets it for a Type=notify unit, received by the
# test's own datagram socket: the messages, in order and from which
# process, across start, HUP, USR2 and QUIT; watchdog pings while the
# master runs; nothing from the workers.
class SystemdNotifyIntegrationTest < Minitest::Test
  # Tells whether the worker's environment still names the socket.
  APP = <<~'RU'
    run ->(env) { [200, { "content-type" => "text/plain" }, ["NOTIFY_SOCKET=#{ENV['NOTIFY_SOCKET'].inspect}"]] }
  RU
  # The watchdog systemd would ask for: WATCHDOG=1 every 0.3 s.
  WATCHDOG_USEC = 600_000

  def setup
    @dir = Dir.mktmpdir("narwhal-notify")
    @notify = Narwhal::NotifySocket.new(File.join(@dir, "notify.sock"))
    @pids = []
  end

  def teardown
    @pids.each do |pid|
      Process.kill(:KILL, pid)
    rescue Errno::ESRCH
      nil
    end
    @server&.stop
    @notify.close
    FileUtils.rm_rf(@dir)
  end

  # WATCHDOG_PID=$$: systemd names the process it started, as here.
  def start
    @server = Narwhal::ServerProcess.start(
      app: APP, lint: false, workers: 2, config: "worker_processes 2\n",
      env: { "NOTIFY_SOCKET" => @notify.path, "WATCHDOG_USEC" => WATCHDOG_USEC.to_s },
      wrapper: ["/bin/sh", "-c", 'WATCHDOG_PID=$$ exec "$0" "$@"']
    )
  end

  def assert_message(fields, pid:)
    message = @notify.next_message
    assert_equal pid, message.pid, "sent by #{message.pid}: #{message.text.inspect}"
    fields.each do |name, value|
      value.is_a?(Regexp) ? assert_match(value, message.fields[name]) : assert_equal(value, message.fields[name])
    end
    message
  end

  def pings_from(pid, count)
    wait_until(timeout: 20, message: "#{count} WATCHDOG=1 from pid=#{pid}") do
      @notify.pings.count { |(sender, _)| sender == pid } >= count
    end
  end

  def test_ready_reload_handover_and_stop
    start
    master = @server.pid
    assert_message({ "READY" => "1", "MAINPID" => master.to_s, "STATUS" => "serving, worker_processes 2" }, pid: master)
    assert_match(/systemd notify: NOTIFY_SOCKET=#{Regexp.escape(@notify.path)}, WATCHDOG=1 every 0.3s/, @server.log)
    client = @server.connect.write("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert_equal "NOTIFY_SOCKET=nil", client.read_response(timeout: 20).body, "a worker sees NOTIFY_SOCKET"
    client.close

    # the pings come from the master, about every WATCHDOG_USEC / 2
    pings_from(master, 4)
    times = @notify.pings.select { |(pid, _)| pid == master }.map(&:last)
    assert_operator times.last - times.first, :>=, 0.25 * (times.size - 1), "pings closer than WATCHDOG_USEC / 2"

    # HUP: RELOADING=1 stamped with the monotonic clock, then READY=1
    before = Process.clock_gettime(Process::CLOCK_MONOTONIC, :microsecond)
    @server.signal(:HUP)
    reloading = assert_message({ "RELOADING" => "1", "STATUS" => "reloading the configuration" }, pid: master)
    assert_includes before..Process.clock_gettime(Process::CLOCK_MONOTONIC, :microsecond),
                    Integer(reloading.fields["MONOTONIC_USEC"])
    assert_message({ "READY" => "1", "STATUS" => "serving, worker_processes 2" }, pid: master)

    # USR2: the new master makes itself the main pid once it serves; when
    # the old one is told to leave it hands the unit over, and never says STOPPING=1
    @server.signal(:USR2)
    status = assert_message({ "STATUS" => /\Astarting a new master pid=\d+\z/ }, pid: master)
    successor = Integer(status.fields["STATUS"][/\d+\z/])
    @pids << successor
    assert_message({ "READY" => "1", "MAINPID" => successor.to_s }, pid: successor)
    pings_from(successor, 2) # WATCHDOG_PID followed it
    @server.signal(:QUIT)
    assert_message({ "MAINPID" => successor.to_s, "STATUS" => "handed over to the new master pid=#{successor}" },
                   pid: master)
    old_pings = @notify.pings.count { |(pid, _)| pid == master }
    assert @server.wait_exit(timeout: 30).success?
    assert_empty @notify.pending, "the old master said more after handing over"
    assert_equal old_pings, @notify.pings.count { |(pid, _)| pid == master }, "the old master pinged after handing over"
    pings_from(successor, 4)

    # systemctl stop: STOPPING=1 from the (new) main process, at once
    Process.kill(:QUIT, successor)
    assert_message({ "STOPPING" => "1", "STATUS" => "stopping (QUIT received)" }, pid: successor)
    wait_until(timeout: 30, message: "new master gone") { !File.exist?("/proc/#{successor}") || zombie?(successor) }
    senders = @notify.pings.map(&:first).uniq
    assert_empty senders - [master, successor], "WATCHDOG=1 from a process other than the masters"
  end

  def zombie?(pid)
    File.read("/proc/#{pid}/stat").split(") ", 2).last.start_with?("Z")
  rescue Errno::ENOENT
    true
  end
end
