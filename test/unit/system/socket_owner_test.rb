# frozen_string_literal: true

require "test_helper"

# Which process holds a TCP port or a Unix socket path, read from /proc, so
# that "address in use" names it: found for a real listener in a child
# process, nil for what nobody holds.
class SystemSocketOwnerTest < Minitest::Test
  SocketOwner = Narwhal::System::SocketOwner

  def setup
    @dir = Dir.mktmpdir("narwhal-owner")
  end

  def teardown
    if @child
      Process.kill(:KILL, @child)
      Process.wait(@child)
    end
    FileUtils.rm_rf(@dir)
  end

  # A child that listens on the server and waits; returns once it holds it.
  def hold_in_child(server)
    ready_r, ready_w = IO.pipe
    @child = fork do
      ready_r.close
      ready_w.write(".")
      ready_w.close
      sleep 60 # held until the test kills it
      exit!(0)
    end
    ready_w.close
    assert_equal ".", ready_r.read(1)
    server.close # the child's copy alone holds it now
    @child
  end

  def test_names_the_process_on_a_tcp_port
    server = TCPServer.new("127.0.0.1", 0)
    port = server.addr[1]
    pid = hold_in_child(server)
    described = SocketOwner.describe(:tcp, port)
    assert_match(/\Apid #{pid} \(.+\)\z/, described)
    assert_includes described, File.read("/proc/#{pid}/cmdline").split("\0").first.to_s[0, 40]
  end

  def test_names_the_process_on_a_unix_socket_path
    path = File.join(@dir, "held.sock")
    pid = hold_in_child(UNIXServer.new(path))
    assert_match(/\Apid #{pid} \(/, SocketOwner.describe(:unix, path))
  end

  def test_nobody_holds_a_free_port_or_a_missing_path
    server = TCPServer.new("127.0.0.1", 0)
    port = server.addr[1]
    server.close
    assert_nil SocketOwner.describe(:tcp, port)
    assert_nil SocketOwner.describe(:unix, File.join(@dir, "none.sock"))
  end

  # The command line as ps shows it, a long one cut to 60 characters.
  def test_the_command_is_its_command_line_a_long_one_cut
    long = "a" * 80
    @child = Process.spawn(RbConfig.ruby, "-e", "sleep", long)
    full = wait_until(message: "the child's exec") do
      line = File.read("/proc/#{@child}/cmdline").split("\0").join(" ")
      line if line.end_with?(long)
    end
    assert_equal "#{full[0, 57]}...", SocketOwner.command(@child)
    Process.kill(:KILL, @child)
    Process.wait(@child)
    @child = Process.spawn("sleep", "60")
    wait_until(message: "sleep's exec") { SocketOwner.command(@child) == "sleep 60" }
  end
end
