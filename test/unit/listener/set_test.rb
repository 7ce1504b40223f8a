# frozen_string_literal: true

require "test_helper"
require "logger"
require "stringio"

# Binding, inheriting and closing the listen sockets of one server.
class ListenerSetTest < Minitest::Test
  def setup
    @log = StringIO.new
    @env = {}
    @set = Narwhal::Listener::Set.new(Logger.new(@log), env: @env)
    @dir = Dir.mktmpdir
  end

  def teardown
    @set.close # the inherited descriptors too: the set owns them
    FileUtils.rm_rf(@dir)
  end

  # Listening sockets as a parent process hands them down: the descriptor
  # is the child's, whose Listener alone closes it.
  def parent_sockets(count)
    Array.new(count) { TCPServer.new("127.0.0.1", 0).tap { |s| s.autoclose = false } }
  end

  def address_of(io)
    "127.0.0.1:#{io.addr[1]}"
  end

  def refused?(address)
    TCPSocket.new(*address.split(":")).close
    false
  rescue Errno::ECONNREFUSED
    true
  end

  def test_the_default_address_when_neither_config_nor_parent_gave_any
    @set.open([], default: "127.0.0.1:0")
    listener = @set.first
    assert_equal 1, @set.count
    assert_match(/\A127\.0\.0\.1:\d+\z/, listener.address)
    assert_includes @log.string, "listening on addr=#{listener.address} fd=#{listener.io.fileno} " \
                                 "url=http://#{listener.address}\n"
    assert_equal 1, @log.string.lines.size, "one line per listener"
  end

  def test_configured_addresses_are_bound_in_order_and_the_default_is_not
    path = File.join(@dir, "a.sock")
    @set.open([[path, {}], ["127.0.0.1:0", { backlog: 16 }]], default: "127.0.0.1:1")
    assert_equal [path, nil], @set.map { |l| l.unix? ? l.address : nil }
    assert_match(/\A127\.0\.0\.1:\d+\z/, @set.to_a[1].address)
    assert File.socket?(path)
  end

  # A parent's sockets (USR2, UNICORN_FD) and no address configured: all
  # are kept, nothing is bound, and the variables are gone from the env.
  def test_inherited_by_descriptor_number_in_the_environment
    parent = parent_sockets(2)
    @env.merge!("NARWHAL_FD" => parent.map(&:fileno).join(","), "UNICORN_FD" => "999")
    @set.open([], default: "127.0.0.1:0")
    assert_equal parent.map(&:fileno), @set.map { |l| l.io.fileno }
    parent.each do |io|
      assert_includes @log.string, "inherited addr=#{address_of(io)} fd=#{io.fileno} url=http://#{address_of(io)}\n"
    end
    refute_includes @log.string, "listening on addr="
    assert_empty @env
  end

  def test_unicorn_fd_when_there_is_no_narwhal_fd
    parent = parent_sockets(1)
    @env["UNICORN_FD"] = parent[0].fileno.to_s
    @set.open([], default: "127.0.0.1:0")
    assert_equal [address_of(parent[0])], @set.map(&:address)
  end

  # systemd's sockets are for the process it started, not for its children.
  def test_listen_fds_for_another_pid_are_ignored_and_cleared
    @env.merge!("LISTEN_PID" => (Process.pid + 1).to_s, "LISTEN_FDS" => "2", "LISTEN_FDNAMES" => "a:b")
    @set.open([], default: "127.0.0.1:0")
    assert_includes @log.string, "listening on addr=127.0.0.1:"
    assert_empty @env
  end

  # The configuration names one of two inherited sockets: that one is kept
  # (the same descriptor, never closed and bound again), the other closed.
  def test_inherited_sockets_the_config_names_are_kept_the_others_closed
    kept, dropped = parent_sockets(2)
    kept_address, dropped_address = address_of(kept), address_of(dropped)
    @env["NARWHAL_FD"] = "#{kept.fileno},#{dropped.fileno}"
    @set.open([["localhost:#{kept.addr[1]}", {}]], default: "127.0.0.1:0")
    assert_equal [kept.fileno], @set.map { |l| l.io.fileno }
    assert_includes @log.string, "inherited addr=#{kept_address} fd=#{kept.fileno} url=http://#{kept_address}\n"
    assert_includes @log.string, "closing inherited addr=#{dropped_address}: not in the configuration\n"
    refute refused?(kept_address)
    assert refused?(dropped_address), "the socket the config does not name is closed"
  end

  # One address fails: what was bound before it is closed (its port is
  # free, its socket file gone) and the error names the address.
  def test_a_failed_bind_closes_what_was_bound_before_it
    path = File.join(@dir, "first.sock")
    error = assert_raises(Narwhal::Listener::Error) do
      @set.open([[path, {}], ["127.0.0.1:0", {}], ["192.0.2.1:8080", {}]], default: "127.0.0.1:0")
    end
    assert_match(/\Acannot listen on 192\.0\.2\.1:8080: /, error.message)
    tcp = @log.string[/listening on addr=(127\.0\.0\.1:\d+)/, 1]
    assert tcp, @log.string
    assert refused?(tcp), "the port bound before the failure is closed"
    refute File.exist?(path), "the socket file bound before the failure is removed"
    assert_equal 0, @set.count
  end

  def test_listen_adds_one_more_listener
    @set.open([["127.0.0.1:0", {}]], default: "127.0.0.1:0")
    extra = @set.listen("127.0.0.1:0", tries: 0)
    assert_equal 2, @set.count
    assert_same extra, @set.to_a.last
    assert_includes @log.string, "listening on addr=#{extra.address} fd=#{extra.io.fileno} url=http://#{extra.address}\n"
  end

  # USR2's child: the descriptors survive exec and NARWHAL_FD names them.
  def test_pass_on_exec_names_the_descriptors_and_keeps_them_open_across_exec
    @set.open([["127.0.0.1:0", {}], ["127.0.0.1:0", {}]], default: "127.0.0.1:0")
    fds = @set.map { |l| l.io.fileno }
    assert_equal fds.to_h { |fd| [fd, fd] }, @set.pass_on_exec
    assert_equal fds.join(","), @env["NARWHAL_FD"]
    @set.each { |l| refute l.io.close_on_exec? }
  end

  def test_close_removes_socket_files_unless_told_to_keep_them
    path = File.join(@dir, "kept.sock")
    @set.open([[path, {}]], default: "127.0.0.1:0")
    @set.close(unlink: false)
    assert File.socket?(path), "a re-exec'd master still serves it"
    assert_equal 0, @set.count
    other = Narwhal::Listener::Set.new(Logger.new(StringIO.new), env: {})
    other.open([[path, {}]], default: "127.0.0.1:0") # the stale file is replaced
    other.close
    refute File.exist?(path)
  end
end
