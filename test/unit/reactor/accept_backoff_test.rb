# frozen_string_literal: true

require "test_helper"
require "logger"
require "stringio"

class AcceptBackoffTest < Minitest::Test
  def setup
    @out = StringIO.new
    logger = Logger.new(@out)
    logger.formatter = ->(severity, _time, _prog, message) { "#{severity} #{message}\n" }
    @backoff = Narwhal::Reactor::AcceptBackoff.new(logger)
  end

  def emfile
    Errno::EMFILE.new
  end

  def test_pauses_double_up_to_the_cap_and_reset_after_an_accept_works
    refute @backoff.failing?
    pauses = Array.new(9) { |i| @backoff.failed(emfile, i * 0.001) }
    assert_equal [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.0, 1.0], pauses
    assert @backoff.failing?
    @backoff.recovered(5.0)
    refute @backoff.failing?
    assert_equal 0.01, @backoff.failed(emfile, 6.0)
  end

  def test_logs_at_most_once_a_second_with_the_count_and_once_on_recovery
    limit = Process.getrlimit(:NOFILE).first
    20.times { |i| @backoff.failed(emfile, 100 + (i * 0.125)) } # eight a second
    @backoff.recovered(102.5)
    assert_equal [
      "ERROR accept failed: too many open files (limit #{limit} per process: raise it with ulimit -n or " \
      "LimitNOFILE=); pausing accepts for 0.01s",
      "ERROR accept failed: too many open files (limit #{limit} per process: raise it with ulimit -n or " \
      "LimitNOFILE=); pausing accepts for 1.00s (8 failed in 1.00s)",
      "ERROR accept failed: too many open files (limit #{limit} per process: raise it with ulimit -n or " \
      "LimitNOFILE=); pausing accepts for 1.00s (8 failed in 1.00s)",
      "INFO accepting again after 2.50s of failed accepts"
    ], @out.string.lines.map(&:chomp)
  end

  def test_one_descriptor_back_at_a_time_does_not_flood_the_log
    t = 0.0
    100.times do # fail, then one accept works, every 10 ms for a second
      @backoff.failed(emfile, t)
      @backoff.recovered(t + 0.005)
      t += 0.01
    end
    assert_equal 2, @out.string.lines.size, @out.string
  end

  def test_other_resource_errors_say_what_ran_short
    @backoff.failed(Errno::ENFILE.new, 0.0)
    @backoff.failed(Errno::ENOBUFS.new, 1.0)
    lines = @out.string.lines
    assert_match(/accept failed: too many open files on this machine \(fs\.file-max\)/, lines[0])
    assert_match(/accept failed: the kernel is short of memory for sockets \(no buffer space available\)/, lines[1])
  end
end
