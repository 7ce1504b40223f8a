# frozen_string_literal: true

require "test_helper"
require_relative "../support/access_log_lines"

# The access log file itself: opened for appending, reopenable on USR1, and
# a write that fails logged rather than raised. Its lines are the formats'
# tests (access_log/combined_test.rb, json_test.rb, format_test.rb), their
# gathering the buffer's (access_log/buffer_test.rb).
class AccessLogTest < Minitest::Test
  include Narwhal::AccessLogLines

  def test_a_failing_write_is_logged_not_raised
    log = writer(:combined)
    access = @log
    access.close
    @log = nil
    log.record(ENV_GET, 200, {}, 1, 0.1, nil)
    access.flush
    log.record(ENV_GET, 200, {}, 1, 0.1, nil)
    access.flush
    assert_equal 1, @errors.string.scan(/access_log #{Regexp.escape(@path)}: IOError/).size, @errors.string
  end

  def test_a_file_that_cannot_be_opened_is_a_boot_error
    e = assert_raises(Narwhal::BootError) { Narwhal::AccessLog.open(File.join(@dir, "no/such.log"), :json, nil) }
    assert_equal "cannot open access_log #{@dir}/no/such.log: no such file or directory", e.message
  end

  def test_a_line_in_one_write_on_an_append_only_file
    log = writer(:combined)
    file = @log.instance_variable_get(:@file)
    assert_equal File::APPEND, file.fcntl(Fcntl::F_GETFL) & File::APPEND
    assert Narwhal::System::LogReopener.reopenable?(file), "USR1 reopens it"
    log.record(ENV_GET, 200, {}, 1, 0.1, nil)
    assert_equal 1, lines.size
  end
end
