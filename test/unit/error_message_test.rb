# frozen_string_literal: true

require "test_helper"

class ErrorMessageTest < Minitest::Test
  # an app's own exception: its name says what failed
  class GatewayDown < StandardError; end

  def message_of
    yield
    flunk "expected an exception"
  rescue StandardError, ScriptError => e
    Narwhal::ErrorMessage.for(e)
  end

  def test_system_errors_read_as_path_and_reason
    assert_equal "/nonexistent/app.pid: no such file or directory",
                 message_of { File.open("/nonexistent/app.pid", "w") }
    assert_equal "127.0.0.1:1: address already in use",
                 message_of { raise Errno::EADDRINUSE, "bind(2) for 127.0.0.1:1" }
    assert_equal "permission denied", message_of { raise Errno::EACCES }
  end

  def test_exit_statuses_read_as_words
    exited = Process.wait2(Process.spawn(RbConfig.ruby, "-e", "exit 3")).last
    assert_equal "exit 3", Narwhal::ErrorMessage.exit_status(exited)
    killed = Process.spawn(RbConfig.ruby, "-e", "sleep 30")
    Process.kill(:KILL, killed)
    assert_equal "killed by SIGKILL", Narwhal::ErrorMessage.exit_status(Process.wait2(killed).last)
  end

  def test_core_classes_are_left_out_and_others_kept
    assert_equal "boom", message_of { raise "boom" }
    assert_equal "bad value", message_of { raise ArgumentError, "bad value" }
    assert_equal "cannot load such file -- nosuchlib", message_of { require "nosuchlib" }
    assert_equal "no route (ErrorMessageTest::GatewayDown)", message_of { raise GatewayDown, "no route" }
  end
end
