# frozen_string_literal: true

require "test_helper"

class ListenBannerTest < Minitest::Test
  def test_a_url_for_tcp_addresses_only
    assert_equal " url=http://127.0.0.1:8080", Narwhal::Listener::Banner.url_field("127.0.0.1:8080")
    assert_equal " url=http://[::1]:8080", Narwhal::Listener::Banner.url_field("[::1]:8080")
    assert_equal "", Narwhal::Listener::Banner.url_field("/run/app.sock")
  end

  def stat(pgrp:, tpgid:)
    file = Tempfile.new("stat")
    # pid (comm with spaces) state ppid pgrp session tty_nr tpgid ...
    file.write("4242 (ruby (x) y) S 1 #{pgrp} #{pgrp} 34816 #{tpgid} 4194560 0 0\n")
    file.close
    file
  end

  def how_to_stop(**ids)
    log = StringIO.new
    Narwhal::Listener::Banner.how_to_stop(Logger.new(log), stat: stat(**ids).path)
    log.string
  end

  # Ctrl-C reaches the foreground group of the terminal, and only it.
  def test_ctrl_c_is_offered_in_the_foreground_of_a_terminal_only
    assert_match(/Ctrl-C to stop$/, how_to_stop(pgrp: 4242, tpgid: 4242))
    assert_empty how_to_stop(pgrp: 4242, tpgid: 4300), "in the background (&) or its own group"
    assert_empty how_to_stop(pgrp: 4242, tpgid: -1), "no terminal: a service, a daemon, a container"
    log = StringIO.new
    Narwhal::Listener::Banner.how_to_stop(Logger.new(log), stat: "/nonexistent/stat")
    assert_empty log.string
  end
end
