# frozen_string_literal: true

require "test_helper"

class ProcessMemoryTest < Minitest::Test
  MIB = 1024 * 1024

  # A child that holds `mib` MiB it has written to, and says when it has.
  def with_child(mib)
    r, w = IO.pipe
    pid = Process.spawn(RbConfig.ruby, "-e", "s = 'x' * (#{mib} * 1024 * 1024); $stdout.puts(s.size); " \
                                             "$stdout.flush; sleep", out: w)
    w.close
    assert r.gets, "the child did not start"
    yield pid
  ensure
    Process.kill(:KILL, pid)
    Process.wait(pid)
    r.close
  end

  def test_rss_and_pss_grow_with_what_a_process_touches
    small = with_child(1) { |pid| [Narwhal::System::ProcessMemory.rss(pid), Narwhal::System::ProcessMemory.pss(pid)] }
    big = with_child(64) { |pid| [Narwhal::System::ProcessMemory.rss(pid), Narwhal::System::ProcessMemory.pss(pid)] }
    assert_operator small[0], :>, MIB
    assert_operator small[1], :>, 0
    assert_operator small[1], :<=, small[0] + MIB
    assert_operator big[0], :>, small[0] + (48 * MIB)
    assert_operator big[1], :>, small[1] + (48 * MIB)
  end

  def test_a_gone_process_has_no_memory
    pid = Process.spawn(RbConfig.ruby, "-e", "exit")
    Process.wait(pid)
    assert_nil Narwhal::System::ProcessMemory.rss(pid)
    assert_nil Narwhal::System::ProcessMemory.pss(pid)
  end
end
