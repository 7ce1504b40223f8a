# frozen_string_literal: true

require "test_helper"
require "logger"
require "stringio"
require "support/notify_socket"

class SystemdNotifyTest < Minitest::Test
  def setup
    @dir = Dir.mktmpdir("narwhal-notify")
    @socket = Narwhal::NotifySocket.new(File.join(@dir, "notify.sock"))
    @log = StringIO.new
    @logger = Logger.new(@log)
  end

  def teardown
    @socket.close
    FileUtils.rm_rf(@dir)
  end

  def notifier(env)
    Narwhal::Master::SystemdNotify.new(@logger, env)
  end

  def test_ready_status_reloading_and_stopping
    notify = notifier("NOTIFY_SOCKET" => @socket.path)
    assert notify.enabled?
    notify.ready(3)
    notify.status("line one\nline two")
    notify.reloading
    notify.stopping("TERM")
    texts = Array.new(4) { @socket.next_message.text }
    assert_equal "READY=1\nMAINPID=#{Process.pid}\nSTATUS=serving, worker_processes 3", texts[0]
    assert_equal "STATUS=line one line two", texts[1], "a newline would start another assignment"
    assert_match(/\ARELOADING=1\nMONOTONIC_USEC=\d+\nSTATUS=reloading the configuration\z/, texts[2])
    assert_equal "STOPPING=1\nSTATUS=stopping (TERM)", texts[3]
  end

  # After USR2: the new master claims the unit once its upgrade succeeded;
  # the old one takes it back when the new one fails.
  def test_an_upgrade_that_succeeds_or_fails_says_so
    notify = notifier("NOTIFY_SOCKET" => @socket.path)
    notify.ready(2, "upgrade from pid=77 succeeded")
    assert_equal "READY=1\nMAINPID=#{Process.pid}\nSTATUS=serving, worker_processes 2; upgrade from pid=77 succeeded",
                 @socket.next_message.text
    notify.upgrade_failed("the new master pid=88 gave up: no worker could boot", 2)
    assert_equal "READY=1\nMAINPID=#{Process.pid}\nSTATUS=serving, worker_processes 2; upgrade failed: the new " \
                 "master pid=88 gave up: no worker could boot", @socket.next_message.text
  end

  def test_an_abstract_socket_is_named_with_an_at_sign
    name = "narwhal-test-#{Process.pid}-#{rand(1 << 30)}"
    abstract = Socket.new(:UNIX, :DGRAM)
    abstract.bind(Socket.sockaddr_un("\0#{name}"))
    notifier("NOTIFY_SOCKET" => "@#{name}").ready(1)
    assert abstract.wait_readable(5)
    assert_match(/\AREADY=1\n/, abstract.recv(4096))
  ensure
    abstract&.close
  end

  # After USR2's hand-over the old master speaks no more: no STOPPING=1, no pings.
  def test_a_handover_sends_mainpid_and_then_nothing
    notify = notifier("NOTIFY_SOCKET" => @socket.path, "WATCHDOG_USEC" => "2")
    notify.stopping("QUIT", successor: 4242)
    assert_equal "MAINPID=4242\nSTATUS=handed over to the new master pid=4242", @socket.next_message.text
    notify.watchdog
    notify.stopping("QUIT")
    notify.status("x")
    assert_empty @socket.pending
    assert_empty @socket.pings
  end

  def test_watchdog_every_half_of_watchdog_usec_for_this_pid_only
    notify = notifier("NOTIFY_SOCKET" => @socket.path, "WATCHDOG_USEC" => "200000", "WATCHDOG_PID" => Process.pid.to_s)
    assert_match(/WATCHDOG=1 every 0.1s/, @log.string)
    notify.watchdog
    sent = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    notify.watchdog # not due yet
    assert_operator notify.watchdog_wait, :>, 0.05
    wait_until(message: "one ping") { @socket.pings.size == 1 }
    wait_until(message: "next ping due") { notify.watchdog_wait.zero? }
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - sent, :>=, 0.09
    notify.watchdog
    wait_until(message: "two pings") { @socket.pings.size == 2 }

    other = notifier("NOTIFY_SOCKET" => @socket.path, "WATCHDOG_USEC" => "200000", "WATCHDOG_PID" => "1")
    assert_nil other.watchdog_wait
    other.watchdog
    [nil, "", "0", "soon"].each { |usec| assert_nil notifier("NOTIFY_SOCKET" => @socket.path, "WATCHDOG_USEC" => usec).watchdog_wait }
    assert_equal 2, @socket.pings.size
  end

  def test_without_notify_socket_nothing_happens
    [{}, { "NOTIFY_SOCKET" => "" }, { "WATCHDOG_USEC" => "1000" }].each do |env|
      notify = notifier(env)
      refute notify.enabled?
      assert_nil notify.watchdog_wait
      notify.ready(1)
      notify.stopping("QUIT")
    end
    assert_empty @socket.pending
    assert_empty @log.string
  end

  def test_a_socket_that_is_not_a_path_is_refused_with_a_warning
    refute notifier("NOTIFY_SOCKET" => "relative/notify").enabled?
    assert_match(/NOTIFY_SOCKET="relative\/notify" is neither a path nor @name; not notifying/, @log.string)
  end

  # A gone socket must not stop the master, nor fill its log every ping.
  def test_a_failed_send_is_logged_once
    notify = notifier("NOTIFY_SOCKET" => File.join(@dir, "nobody.sock"))
    3.times { notify.status("x") }
    assert_equal 1, @log.string.scan(/sending to NOTIFY_SOCKET failed: .*no such file or directory/).size
  end

  def test_a_worker_forgets_the_socket_and_usr2_child_takes_the_watchdog
    with_env("NOTIFY_SOCKET" => @socket.path, "WATCHDOG_USEC" => "1000", "WATCHDOG_PID" => "1") do
      notify = notifier(ENV)
      notify.before_exec
      assert_equal Process.pid.to_s, ENV.fetch("WATCHDOG_PID")
      notify.forget_in_child
      assert_nil ENV["NOTIFY_SOCKET"]
      assert_nil ENV["WATCHDOG_USEC"]
      assert_nil ENV["WATCHDOG_PID"]
      notify.ready(1)
      assert_empty @socket.pending
    end
  end
end
