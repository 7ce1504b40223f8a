# frozen_string_literal: true

require "test_helper"
require "socket"
require "logger"

# The end of a response the reactor sends after the app returned: progress
# restarts its deadline; its failures and its timeout are logged.
class PendingSendTest < Minitest::Test
  def setup
    @sock, @peer = UNIXSocket.pair
    @budget = Narwhal::SocketWriter::SpoolBudget.new(64 * 1024 * 1024, 64 * 1024, disk_reserve: 0)
    @out = Narwhal::SocketWriter.new(@sock, 5, @budget)
    @log = StringIO.new
    @send = Narwhal::Connection::PendingSend.new(@out, 2, Logger.new(@log))
    @env = { "REQUEST_METHOD" => "GET", "PATH_INFO" => "/big" }
  end

  def teardown
    @out.discard_spool
    @sock.close
    @peer.close unless @peer.closed?
  end

  def test_the_deadline_moves_with_each_byte_taken_and_true_once_all_is_sent
    @out.write("a" * 4 * 1024 * 1024)
    @send.start(@env, false)
    first = @send.deadline
    assert_in_delta Narwhal::Clock.now + 2, first, 0.5
    assert_equal false, @send.continue, "nothing read yet: more to send"
    assert_equal first, @send.deadline, "no progress, same deadline"
    sleep 0.01 # so that a new deadline is a later one
    done = false
    until done
      @peer.read_nonblock(1 << 20, exception: false)
      done = @send.continue
    end
    assert_operator @send.deadline, :>, first
  end

  def test_a_client_gone_answers_nil
    @out.write("a" * 4 * 1024 * 1024)
    @send.start(@env, true)
    assert @send.close_after
    @peer.close
    assert_nil @send.continue
  end

  def test_a_file_that_shrank_is_logged_and_answers_nil
    Tempfile.create("short") do |f|
      f.write("abc")
      f.flush
      @out.write("a" * 4 * 1024 * 1024)
      @out.write_file(f, 10)
      @send.start(@env, false)
      result = :unset
      while result == false || result == :unset
        @peer.read_nonblock(1 << 20, exception: false)
        result = @send.continue
      end
      assert_nil result
      assert_match(/response file ended 7 bytes before its length \(GET \/big\); closing connection/, @log.string)
    end
  end

  def test_a_timeout_is_logged_with_the_request
    @send.start(@env, false)
    @send.timed_out
    assert_match(%r{write timeout: client took no data for 2s, closing \(GET /big\)}, @log.string)
  end
end
