# frozen_string_literal: true

require "test_helper"
require "stringio"

# Listener: address forms, Unicorn's listen options read back from real
# sockets with getsockopt, bind retries, Unix socket files, inheritance.
class ListenerTest < Minitest::Test
  L = Narwhal::Listener

  # Records what the listener logs, for waiting on a retry.
  class RecordingLogger
    attr_reader :lines

    def initialize
      @lines = Queue.new
    end

    %i[debug info warn error fatal].each do |level|
      define_method(level) { |msg = nil| @lines << [level, msg] }
    end
  end

  def setup
    @listeners = []
    @ios = []
  end

  def teardown
    @listeners.each(&:close)
    @ios.each { |io| io.close unless io.closed? }
    FileUtils.rm_rf(@dir) if @dir
  end

  def listen(address, options = {}, logger = nil)
    L.new(address, options, logger).tap { |l| @listeners << l }
  end

  def tmpdir
    @dir ||= Dir.mktmpdir("nw-listener")
  end

  def int_opt(io, level, name)
    io.getsockopt(level, name).int
  end

  def ipv6?
    TCPServer.new("::1", 0).close
    true
  rescue SystemCallError
    false
  end

  # struct tcp_info of a listening socket: tcpi_sacked is its backlog (Linux)
  def listen_backlog(io)
    io.getsockopt(Socket::IPPROTO_TCP, Socket::TCP_INFO).data.unpack("C8L*")[8 + 5]
  end

  # --- addresses ---

  def test_parse_addresses
    assert_equal [:tcp, "127.0.0.1", 80], L.parse("127.0.0.1:80")
    assert_equal [:tcp, "0.0.0.0", 8080], L.parse(":8080")
    assert_equal [:tcp, "0.0.0.0", 8080], L.parse("*:8080")
    assert_equal [:tcp, "0.0.0.0", 8080], L.parse("8080")
    assert_equal [:tcp, "0.0.0.0", 8080], L.parse(8080)
    assert_equal [:tcp, "::1", 9000], L.parse("[::1]:9000")
    assert_equal [:tcp, "::1", 80], L.parse("[::1]")
    assert_equal [:tcp, "10.1.2.3", 80], L.parse("10.1.2.3")
    assert_equal [:tcp, "localhost", 3000], L.parse("localhost:3000")
    assert_equal [:unix, "/tmp/a.sock"], L.parse("/tmp/a.sock")
    assert_equal [:unix, "/tmp/a.sock"], L.parse("unix:/tmp/a.sock")
    assert_equal [:unix, "rel.sock"], L.parse("unix:rel.sock")
    assert_equal [:unix, "./a.sock"], L.parse("./a.sock")
    assert_equal [:unix, "~/a.sock"], L.parse("~/a.sock")
  end

  def test_parse_rejects_bad_addresses
    ["nope:", "", "host", "1.2.3.4:70000", "unix:", "[::1]:x", "a:b:1"].each do |bad|
      assert_raises(ArgumentError, bad) { L.parse(bad) }
    end
    assert_raises(ArgumentError) { L.parse(70_000) }
    assert_raises(ArgumentError) { L.parse(-1) }
  end

  def test_expand_addr_is_unicorns_canonical_form
    assert_equal "0.0.0.0:8080", L.expand_addr(":8080")
    assert_equal "0.0.0.0:8080", L.expand_addr("*:8080")
    assert_equal "0.0.0.0:8080", L.expand_addr(8080)
    assert_equal "127.0.0.1:80", L.expand_addr("127.0.0.1")
    assert_equal "[::1]:80", L.expand_addr("[::1]")
    assert_equal "[::1]:9000", L.expand_addr("[0:0::0001]:9000")
    assert_includes ["127.0.0.1:3000", "[::1]:3000"], L.expand_addr("localhost:3000")
    assert_equal "/tmp/a.sock", L.expand_addr("unix:/tmp/a.sock")
    assert_equal "/srv/app/a.sock", L.expand_addr("unix:a.sock", "/srv/app")
    assert_equal "/srv/a.sock", L.expand_addr("../a.sock", "/srv/app")
    assert_equal File.join(Dir.home, "a.sock"), L.expand_addr("~/a.sock")
    assert_equal File.join(Dir.pwd, "a.sock"), L.expand_addr("./a.sock")
    e = assert_raises(ArgumentError) { L.expand_addr("no-such-host.invalid:80") }
    assert_match(/cannot resolve "no-such-host.invalid"/, e.message)
  end

  def test_bound_address_matches_expand_addr_of_the_configured_one
    l = listen("127.0.0.1:0")
    assert_equal L.expand_addr("127.0.0.1:#{l.io.local_address.ip_port}"), l.address

    any = listen(":0")
    assert_equal L.expand_addr(":#{any.io.local_address.ip_port}"), any.address
    path = File.join(tmpdir, "s.sock")
    assert_equal L.expand_addr("unix:#{path}"), listen(path).address
  end

  def test_ipv6_address
    skip "no IPv6 loopback" unless ipv6?
    l = listen("[::1]:0")
    assert_match(/\A\[::1\]:\d+\z/, l.address)
    assert_equal L.expand_addr(l.address), l.address
    assert_equal "::1", l.env_defaults["SERVER_NAME"]
  end

  def test_tcp_port_zero_reports_bound_port
    l = listen("127.0.0.1:0")
    assert_match(/\A127\.0\.0\.1:\d+\z/, l.address)
    refute_equal "0", l.env_defaults["SERVER_PORT"]
    assert_equal l.io.fileno, l.fileno
  end

  # --- options ---

  def test_option_problem
    assert_nil L.option_problem({})
    valid = { backlog: 64, rcvbuf: 4096, sndbuf: 4096, tcp_nodelay: false, tcp_nopush: true, ipv6only: true,
              reuseport: true, umask: 0o077, tries: -1, delay: 0.25, tcp_defer_accept: 1, accept_filter: "httpready" }
    assert_nil L.option_problem(valid)
    assert_nil L.option_problem(valid.transform_values { nil }), "nil means the default, as in Unicorn"
    {
      { backlog: 0 } => /backlog expects an Integer > 0, got 0/,
      { backlog: "64" } => /backlog expects an Integer > 0, got "64"/,
      { rcvbuf: -1 } => /rcvbuf expects an Integer > 0/,
      { sndbuf: 1.5 } => /sndbuf expects an Integer > 0/,
      { tcp_nodelay: "yes" } => /tcp_nodelay expects true or false/,
      { tcp_nopush: 1 } => /tcp_nopush expects true or false/,
      { ipv6only: "true" } => /ipv6only expects true or false/,
      { reuseport: 0 } => /reuseport expects true or false/,
      { umask: 0o1000 } => /umask expects an Integer 0..0777/,
      { umask: "077" } => /umask expects an Integer/,
      { tries: 1.5 } => /tries expects an Integer/,
      { delay: -1 } => /delay expects a number of seconds >= 0/,
      { delay: "5" } => /delay expects a number/,
      { delay: Float::NAN } => /delay expects a number/,
      { tcp_defer_accept: -1 } => /tcp_defer_accept expects/,
      { accept_filter: :httpready } => /accept_filter expects a String/,
      { backlogg: 1 } => /unsupported listen option\(s\) :backlogg/,
      { "backlog" => 1 } => /unsupported listen option\(s\) "backlog"/
    }.each do |options, message|
      assert_match message, L.option_problem(options), options.inspect
    end
    assert_match(/must be a Hash/, L.option_problem([]))
  end

  def test_invalid_options_refuse_to_bind
    e = assert_raises(ArgumentError) { L.new("127.0.0.1:0", backlog: -5) }
    assert_match(/backlog/, e.message)
  end

  def test_backlog_default_and_option_and_reapplied
    assert_equal [1024, File.read("/proc/sys/net/core/somaxconn").to_i].min, listen_backlog(listen("127.0.0.1:0").io)
    l = listen("127.0.0.1:0", backlog: 64)
    assert_equal 64, listen_backlog(l.io)
    l.apply_options(backlog: 16)
    assert_equal 16, listen_backlog(l.io)
  end

  def test_buffer_sizes
    l = listen("127.0.0.1:0", rcvbuf: 65_536, sndbuf: 131_072)
    # Linux doubles the value for its bookkeeping; others keep it
    assert_includes 65_536..(2 * 65_536), int_opt(l.io, Socket::SOL_SOCKET, Socket::SO_RCVBUF)
    assert_includes 131_072..(2 * 131_072), int_opt(l.io, Socket::SOL_SOCKET, Socket::SO_SNDBUF)

    u = listen(File.join(tmpdir, "buf.sock"), sndbuf: 262_144)
    assert_includes 262_144..(2 * 262_144), int_opt(u.io, Socket::SOL_SOCKET, Socket::SO_SNDBUF)
  end

  def test_tcp_nodelay_on_by_default_inherited_by_accepted_sockets
    l = listen("127.0.0.1:0")
    refute_equal 0, int_opt(l.io, Socket::IPPROTO_TCP, Socket::TCP_NODELAY)
    client = TCPSocket.new("127.0.0.1", l.io.local_address.ip_port)
    @ios << client
    accepted = wait_until(message: "accept") { l.accept_nonblock.then { |s| s == :wait_readable ? nil : s } }
    @ios << accepted
    refute_equal 0, int_opt(accepted, Socket::IPPROTO_TCP, Socket::TCP_NODELAY)
    refute_equal 0, int_opt(l.io, Socket::SOL_SOCKET, Socket::SO_KEEPALIVE)

    off = listen("127.0.0.1:0", tcp_nodelay: false)
    assert_equal 0, int_opt(off.io, Socket::IPPROTO_TCP, Socket::TCP_NODELAY)
  end

  def test_tcp_nopush_sets_tcp_cork
    skip "no TCP_CORK here" unless L::TCP_CORK
    plain = listen("127.0.0.1:0")
    assert_equal 0, int_opt(plain.io, Socket::IPPROTO_TCP, L::TCP_CORK)
    refute plain.tcp_nopush?
    corked = listen("127.0.0.1:0", tcp_nopush: true)
    assert_equal 1, int_opt(corked.io, Socket::IPPROTO_TCP, L::TCP_CORK)
    assert corked.tcp_nopush?
    corked.apply_options(tcp_nopush: false)
    assert_equal 0, int_opt(corked.io, Socket::IPPROTO_TCP, L::TCP_CORK)
    refute corked.tcp_nopush?
  end

  def test_tcp_defer_accept_only_when_asked
    skip "no TCP_DEFER_ACCEPT here" unless L::TCP_DEFER_ACCEPT
    assert_equal 0, int_opt(listen("127.0.0.1:0").io, Socket::IPPROTO_TCP, L::TCP_DEFER_ACCEPT)
    refute_equal 0, int_opt(listen("127.0.0.1:0", tcp_defer_accept: true).io, Socket::IPPROTO_TCP, L::TCP_DEFER_ACCEPT)
    refute_equal 0, int_opt(listen("127.0.0.1:0", tcp_defer_accept: 5).io, Socket::IPPROTO_TCP, L::TCP_DEFER_ACCEPT)
  end

  def test_ipv6only
    skip "no IPv6" unless ipv6?
    only = listen("[::]:0", ipv6only: true)
    assert_equal 1, int_opt(only.io, Socket::IPPROTO_IPV6, Socket::IPV6_V6ONLY)
    port = only.io.local_address.ip_port
    # the IPv4 side of that port is free: a v4-only server can take it
    v4 = listen("0.0.0.0:#{port}", tries: 0)
    assert_equal "0.0.0.0:#{port}", v4.address

    dual = listen("[::]:0", ipv6only: false)
    assert_equal 0, int_opt(dual.io, Socket::IPPROTO_IPV6, Socket::IPV6_V6ONLY)
    @ios << TCPSocket.new("127.0.0.1", dual.io.local_address.ip_port) # IPv4 reaches it
  end

  def test_reuseport_allows_two_binds_to_one_port
    skip "no SO_REUSEPORT here" unless L::SO_REUSEPORT
    first = listen("127.0.0.1:0", reuseport: true)
    port = first.io.local_address.ip_port
    assert_equal 1, int_opt(first.io, Socket::SOL_SOCKET, L::SO_REUSEPORT)
    second = listen("127.0.0.1:#{port}", reuseport: true, tries: 0)
    assert_equal first.address, second.address

    plain = listen("127.0.0.1:0")
    assert_raises(Errno::EADDRINUSE) { listen(plain.address, tries: 0) }
  end

  def test_umask_sets_unix_socket_file_mode_and_is_restored
    before = File.umask
    default = listen(File.join(tmpdir, "default.sock"))
    assert_equal 0o777, File.stat(default.address).mode & 0o777, "Unicorn's default umask 0: anyone may connect"
    private_sock = listen(File.join(tmpdir, "private.sock"), umask: 0o077)
    assert_equal 0o700, File.stat(private_sock.address).mode & 0o777
    group = listen(File.join(tmpdir, "group.sock"), umask: 0o007)
    assert_equal 0o770, File.stat(group.address).mode & 0o777
    assert_equal before, File.umask
  end

  # --- retries ---

  def test_retries_until_a_held_port_is_freed
    holder = TCPServer.new("127.0.0.1", 0)
    port = holder.addr[1]
    logger = RecordingLogger.new
    binder = Thread.new { L.new("127.0.0.1:#{port}", { tries: -1, delay: 0.02 }, logger) }
    wait_until(message: "a logged retry") { !logger.lines.empty? } # the first attempt failed
    level, message = logger.lines.pop
    assert_equal :error, level
    assert_equal "127.0.0.1:#{port} in use, retrying in 0.02s (until it is free)", message
    holder.close
    listener = binder.join(10)&.value
    assert listener, "bound once the port was free"
    @listeners << listener
    assert_equal "127.0.0.1:#{port}", listener.address
  ensure
    holder&.close unless holder&.closed?
    binder&.kill
  end

  def test_retries_a_live_unix_socket_until_its_server_is_gone
    path = File.join(tmpdir, "busy.sock")
    holder = UNIXServer.new(path)
    logger = RecordingLogger.new
    binder = Thread.new { L.new(path, { tries: 100, delay: 0.02 }, logger) }
    wait_until(message: "a logged retry") { !logger.lines.empty? }
    _, message = logger.lines.pop
    assert_equal "#{path} in use, retrying in 0.02s (99 retries left)", message
    holder.close # leaves a stale file behind, which the next try replaces
    listener = binder.join(10)&.value
    assert listener
    @listeners << listener
    assert_equal path, listener.address
  ensure
    holder&.close unless holder&.closed?
    binder&.kill
  end

  def test_tries_counts_retries_after_the_first_attempt
    holder = TCPServer.new("127.0.0.1", 0)
    @ios << holder
    address = "127.0.0.1:#{holder.addr[1]}"
    logger = RecordingLogger.new
    assert_raises(Errno::EADDRINUSE) { L.new(address, { tries: 2, delay: 0 }, logger) }
    assert_equal 2, logger.lines.size
    silent = RecordingLogger.new
    assert_raises(Errno::EADDRINUSE) { L.new(address, { tries: 0 }, silent) }
    assert_equal 0, silent.lines.size
  end

  def test_default_retry_delay
    assert_equal 5, L::DEFAULTS[:tries]
    assert_equal 0.5, L::DEFAULTS[:delay]
  end

  # --- Unix socket files ---

  def test_stale_unix_socket_is_replaced_and_live_one_refused
    path = File.join(tmpdir, "s.sock")
    UNIXServer.new(path).close # leaves a stale socket file behind
    listener = L.new(path)
    assert File.socket?(path)
    assert_raises(Errno::EADDRINUSE) { L.new(path, tries: 0) } # keywords work as options too
    listener.close
    refute File.exist?(path)
  end

  def test_a_regular_file_is_never_replaced
    path = File.join(tmpdir, "file.sock")
    File.write(path, "data")
    assert_raises(ArgumentError) { L.new(path) }
    assert_equal "data", File.read(path)
  end

  def test_close_unlink_false_keeps_the_socket_file
    path = File.join(tmpdir, "keep.sock")
    L.new(path).close(unlink: false)
    assert File.socket?(path)
  end

  def test_close_leaves_a_socket_file_that_another_server_took_over
    path = File.join(tmpdir, "taken.sock")
    mine = L.new(path)
    File.unlink(path)
    theirs = UNIXServer.new(path)
    @ios << theirs
    mine.close
    assert File.socket?(path)
    @ios << UNIXSocket.new(path) # still theirs, still served
  end

  # --- inheritance ---

  def raw_listening_socket(family, address)
    sock = Socket.new(family, :STREAM)
    sock.bind(address)
    sock.listen(8)
    sock.autoclose = false # the Listener made from its fd owns it
    sock.fileno
  end

  def test_inherit_tcp_descriptor
    fd = raw_listening_socket(:INET, Addrinfo.tcp("127.0.0.1", 0))
    l = L.inherit(fd)
    @listeners << l
    refute l.unix?
    assert_equal fd, l.fileno
    assert_kind_of TCPServer, l.io
    port = l.io.local_address.ip_port
    assert_equal L.expand_addr("127.0.0.1:#{port}"), l.address
    assert l.io.close_on_exec?, "only a deliberate re-exec passes it on"
    @ios << TCPSocket.new("127.0.0.1", port)
    accepted = wait_until(message: "accept") { l.accept_nonblock.then { |s| s == :wait_readable ? nil : s } }
    @ios << accepted
    assert_equal "127.0.0.1", l.remote_addr(accepted)
  end

  def test_inherit_ipv6_descriptor_and_an_io
    skip "no IPv6" unless ipv6?
    l = L.inherit(raw_listening_socket(:INET6, Addrinfo.tcp("::1", 0)))
    @listeners << l
    assert_match(/\A\[::1\]:\d+\z/, l.address)

    server = Socket.new(:INET6, :STREAM)
    server.bind(Addrinfo.tcp("::", 0))
    server.listen(4)
    wrapped = L.inherit(server)
    @listeners << wrapped
    assert_equal "[::]:#{server.local_address.ip_port}", wrapped.address
    refute server.autoclose?, "the Listener is the descriptor's only owner"
  end

  def test_inherit_unix_descriptor
    path = File.join(tmpdir, "inherited.sock")
    l = L.inherit(raw_listening_socket(:UNIX, Addrinfo.unix(path)))
    assert l.unix?
    assert_kind_of UNIXServer, l.io
    assert_equal path, l.address
    assert_equal L.expand_addr("unix:#{path}"), l.address
    @ios << UNIXSocket.new(path)
    l.close(unlink: false)
    assert File.socket?(path)
    again = L.inherit(raw_listening_socket(:UNIX, Addrinfo.unix(File.join(tmpdir, "other.sock"))))
    again.close
    refute File.exist?(File.join(tmpdir, "other.sock"))
  end

  def test_inherit_an_existing_server_object_as_it_is
    server = TCPServer.new("127.0.0.1", 0)
    l = L.inherit(server)
    @listeners << l
    assert_same server, l.io
  end

  def test_inherit_refuses_what_is_not_a_listening_socket
    unbound = Socket.new(:INET, :STREAM)
    @ios << unbound
    e = assert_raises(ArgumentError) { L.inherit(unbound.fileno) }
    assert_match(/not a listening/, e.message)
    r, w = IO.pipe
    @ios.push(r, w)
    assert_raises(ArgumentError) { L.inherit(r.fileno) }
    GC.start # nothing took ownership of the pipe's descriptor
    w.write("x")
    assert_equal "x", r.read(1)
  end

  def test_apply_options_to_an_inherited_socket
    fd = raw_listening_socket(:INET, Addrinfo.tcp("127.0.0.1", 0))
    l = L.inherit(fd)
    @listeners << l
    l.apply_options(tcp_nodelay: false, backlog: 32, rcvbuf: 32_768)
    assert_equal 0, int_opt(l.io, Socket::IPPROTO_TCP, Socket::TCP_NODELAY)
    assert_equal 32, listen_backlog(l.io)
    assert_includes 32_768..65_536, int_opt(l.io, Socket::SOL_SOCKET, Socket::SO_RCVBUF)
    l.options_apply({}) # absent options go back to the defaults
    refute_equal 0, int_opt(l.io, Socket::IPPROTO_TCP, Socket::TCP_NODELAY)
    assert_equal [1024, File.read("/proc/sys/net/core/somaxconn").to_i].min, listen_backlog(l.io)
    assert_raises(ArgumentError) { l.apply_options(backlog: "x") }
  end
end
