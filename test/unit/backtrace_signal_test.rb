# frozen_string_literal: true

require "test_helper"
require "fiddle"

# BacktraceSignal: a process that installed it writes the backtrace of the
# thread the signal reaches to its stderr, counts it in that thread's
# scoreboard sub-slot, and that thread goes no further (it waits for its
# kill). Run on a forked child, as the master runs it on a worker.
class BacktraceSignalTest < Minitest::Test
  def setup
    @board = Narwhal::Scoreboard.new(1)
    @err = Tempfile.new("stderr")
  end

  def teardown
    Process.kill(:KILL, @child) if @child
    Process.wait(@child) if @child
    @err.close!
  end

  # sleep(3) in C with the GVL held: a signal ends it early, unless the
  # handler never returns
  C_SLEEP = Fiddle::Function.new(Fiddle::Handle::DEFAULT["sleep"], [Fiddle::TYPE_INT], Fiddle::TYPE_INT,
                                 need_gvl: true)

  def stuck_in_this_method(resumed)
    C_SLEEP.call(30)
    File.write(resumed, "the call went on")
  end

  def test_the_signalled_thread_writes_its_backtrace_and_goes_no_further
    resumed = "#{@err.path}.resumed"
    @child = fork do
      $stderr.reopen(@err.path, "a")
      slot = @board.thread_slot(0)
      slot.bind_thread!
      Narwhal::BacktraceSignal.install
      slot.request_started("GET", "/stuck", -1)
      stuck_in_this_method(resumed)
      exit!(0)
    end
    request = wait_until(message: "the child's request") { @board.requests_in_flight(0).first }
    refute request.tid.zero?
    assert_equal 0, request.backtraces
    assert Narwhal::BacktraceSignal.request(@child, request.tid)
    wait_until(message: "the backtrace written") { @board.backtraces(0, 0) == 1 }
    text = File.read(@err.path)
    assert_match(/\Anarwhal: backtrace of pid=#{@child} tid=#{request.tid}, innermost frame first:\n/, text)
    assert_match(/^    \(C method\):in `call'\n.*backtrace_signal_test\.rb:\d+:in `stuck_in_this_method'\n/, text)
    sleep 0.2 # a window for what must not happen
    refute File.exist?(resumed), "the interrupted sleep(3) did not return into the app"
  ensure
    File.delete(resumed) if resumed && File.exist?(resumed)
  end

  def test_a_gone_thread_is_false_and_a_process_without_the_handler_ignores_it
    refute Narwhal::BacktraceSignal.request(Process.pid, 2**22 + 12_345), "no such thread"
    # the default action, whatever this process installed (a Server made by
    # another test installs the handler here)
    @child = fork do
      Signal.trap("URG", "SYSTEM_DEFAULT")
      sleep 30
    end
    tid = wait_until(message: "the child's thread") { Dir.children("/proc/#{@child}/task").first }
    assert Narwhal::BacktraceSignal.request(@child, Integer(tid))
    assert_nil Process.wait(@child, Process::WNOHANG), "SIGURG's default is to ignore it"
  end
end
