# frozen_string_literal: true

require "test_helper"

class WorkerReportsTest < Minitest::Test
  def test_reports_from_forked_workers_reach_the_master_whole
    reports = Narwhal::Master::WorkerReports.new
    pids = Array.new(3) do |i|
      fork do
        reports.close_reader
        i.zero? ? reports.ready : reports.boot_failed("config.ru:#{i}: broken\nsecond line #{'é' * 3000}")
        exit!(0)
      end
    end
    pids.each { |pid| Process.wait(pid) }
    got = reports.drain.to_h { |pid, kind, message| [pid, [kind, message]] }
    assert_equal ["ready", ""], got[pids[0]]
    kind, message = got[pids[1]]
    assert_equal "failed", kind
    assert message.start_with?("config.ru:1: broken second line éé"), "one line"
    assert_operator message.bytesize, :<=, Narwhal::Master::WorkerReports::MAX_MESSAGE
    assert message.valid_encoding?
    assert_equal [], reports.drain, "each report is read once"
  end

  def test_a_worker_asks_to_be_replaced
    reports = Narwhal::Master::WorkerReports.new
    pid = fork do
      reports.close_reader
      exit!(reports.retire ? 0 : 1)
    end
    assert Process.wait2(pid).last.success?, "the report was sent"
    assert_equal [[pid, "retire", ""]], reports.drain
  end
end
