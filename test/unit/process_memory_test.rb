# frozen_string_literal: true

require "test_helper"

class ProcessMemoryTest < Minitest::Test
  def test_rss_and_pss_of_this_process_grow_with_what_it_touches
    rss = Narwhal::ProcessMemory.rss(Process.pid)
    pss = Narwhal::ProcessMemory.pss(Process.pid)
    assert_operator rss, :>, 1024 * 1024
    assert_operator pss, :>, 0
    assert_operator pss, :<=, rss + (1024 * 1024)
    ballast = "x" * (64 * 1024 * 1024)
    assert_operator Narwhal::ProcessMemory.rss(Process.pid), :>, rss + (32 * 1024 * 1024)
    ballast.clear
  end

  def test_a_gone_process_has_no_memory
    pid = Process.spawn(RbConfig.ruby, "-e", "exit")
    Process.wait(pid)
    assert_nil Narwhal::ProcessMemory.rss(pid)
    assert_nil Narwhal::ProcessMemory.pss(pid)
  end
end
