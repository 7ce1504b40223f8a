# frozen_string_literal: true

require "test_helper"

class ListenerTest < Minitest::Test
  def test_parse_addresses
    assert_equal [:tcp, "127.0.0.1", 80], Narwhal::Listener.parse("127.0.0.1:80")
    assert_equal [:tcp, "0.0.0.0", 8080], Narwhal::Listener.parse(":8080")
    assert_equal [:tcp, "0.0.0.0", 8080], Narwhal::Listener.parse("8080")
    assert_equal [:tcp, "::1", 9000], Narwhal::Listener.parse("[::1]:9000")
    assert_equal [:tcp, "localhost", 3000], Narwhal::Listener.parse("localhost:3000")
    assert_equal [:unix, "/tmp/a.sock"], Narwhal::Listener.parse("/tmp/a.sock")
    assert_equal [:unix, "/tmp/a.sock"], Narwhal::Listener.parse("unix:/tmp/a.sock")
    assert_raises(ArgumentError) { Narwhal::Listener.parse("nope:") }
  end

  def test_stale_unix_socket_is_replaced_and_live_one_refused
    Dir.mktmpdir do |dir|
      path = File.join(dir, "s.sock")
      UNIXServer.new(path).close # leaves a stale socket file behind
      listener = Narwhal::Listener.new(path)
      assert File.socket?(path)
      assert_raises(Errno::EADDRINUSE) { Narwhal::Listener.new(path) }
      listener.close
      refute File.exist?(path)
    end
  end

  def test_tcp_port_zero_reports_bound_port
    listener = Narwhal::Listener.new("127.0.0.1:0")
    assert_match(/\A127\.0\.0\.1:\d+\z/, listener.address)
    refute_equal "0", listener.env_defaults["SERVER_PORT"]
  ensure
    listener&.close
  end
end
