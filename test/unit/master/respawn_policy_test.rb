# frozen_string_literal: true

require "test_helper"

class RespawnPolicyTest < Minitest::Test
  Status = Struct.new(:text) do
    def inspect = text
  end
  EXIT = Status.new("#<Process::Status: pid 1 exit 3>")

  def setup
    @policy = Narwhal::Master::RespawnPolicy.new
    @pids = 100
  end

  def fork_worker(nr = 0)
    worker = Narwhal::Worker.new(nr)
    worker.pid = (@pids += 1)
    @policy.spawned(worker.pid)
    worker
  end

  def fail_boot(worker, now, error = "config.ru:2: boom")
    @policy.boot_error(worker.pid, error)
    @policy.exited(worker, EXIT, now)
  end

  def test_delays_double_from_half_a_second_up_to_the_cap
    assert_equal [0.5, 1, 2, 4, 8, 16, 30, 30], (1..8).map { |n| Narwhal::Master::RespawnPolicy.delay(n) }
  end

  def test_no_limit_while_nothing_failed
    fork_worker
    assert_nil @policy.allowance(0)
    assert_nil @policy.wait(0)
  end

  def test_a_failed_boot_holds_the_next_fork_back_then_allows_one
    line = fail_boot(fork_worker, 10.0)
    assert_equal "worker=0 pid=101 failed to boot: config.ru:2: boom; 1 failure(s) in a row, " \
                 "next attempt in 0.5s (attempt 2 of 3)", line
    assert_equal 0, @policy.allowance(10.2)
    assert_in_delta 0.3, @policy.wait(10.2)
    assert_equal 1, @policy.allowance(10.5)
    fork_worker
    assert_equal 0, @policy.allowance(11), "one try at a time"
    assert_nil @policy.wait(11), "nothing to wake up for while the try boots"
  end

  def test_the_same_error_again_is_not_written_out_again
    fail_boot(fork_worker, 0)
    line = fail_boot(fork_worker, 1)
    assert_equal "worker=0 pid=102 failed to boot again (same error); 2 failure(s) in a row, " \
                 "next attempt in 1s (attempt 3 of 3)", line
    line = fail_boot(fork_worker, 3, "config.ru:3: other")
    assert_match(/failed to boot: config.ru:3: other; 3 failure\(s\) in a row, giving up\z/, line)
  end

  def test_gives_up_only_when_never_ready_and_nothing_is_still_booting
    fail_boot(fork_worker(0), 0)
    fail_boot(fork_worker(0), 1)
    booting = fork_worker(1) # e.g. TTIN'd meanwhile
    fail_boot(fork_worker(0), 3)
    refute @policy.give_up?, "a worker may still become ready"
    fail_boot(booting, 3.1)
    assert @policy.give_up?
    assert_equal "config.ru:2: boom", @policy.last_error
  end

  def test_workers_failing_together_count_as_one_round
    workers = Array.new(4) { |nr| fork_worker(nr) }
    workers.each { |w| fail_boot(w, 0) }
    assert_equal 1, @policy.rounds
    assert_in_delta 0.5, @policy.wait(0)
  end

  def test_once_a_worker_was_ready_it_never_gives_up_and_the_delay_is_capped
    assert @policy.ready(fork_worker.pid), "the first ready worker"
    now = 0
    line = nil
    10.times do
      line = fail_boot(fork_worker, now)
      now += 100
    end
    refute @policy.give_up?
    assert_match(/10 failure\(s\) in a row, next attempt in 30s\z/, line)
  end

  def test_a_worker_ready_again_resets_the_back_off
    @policy.ready(fork_worker.pid)
    3.times { |i| fail_boot(fork_worker, i * 10) }
    refute @policy.ready(fork_worker.pid), "not the first ready worker"
    assert_nil @policy.allowance(100)
    line = fail_boot(fork_worker, 100)
    assert_match(/failed to boot: config.ru:2: boom; 1 failure\(s\) in a row, next attempt in 0.5s\z/, line)
  end

  # Whether workers on their way are expected to serve: this master's
  # served before, and no boot failed since.
  def test_ever_ready_and_failures_since_the_last_ready_worker
    refute @policy.ever_ready?
    fail_boot(fork_worker, 0)
    fail_boot(fork_worker, 1)
    assert_equal 2, @policy.failures
    @policy.ready(fork_worker.pid)
    assert_equal [true, 0], [@policy.ever_ready?, @policy.failures]
  end

  def test_workers_told_to_stop_or_already_serving_are_not_failures
    quitting = fork_worker
    quitting.quitting = true
    assert_nil fail_boot(quitting, 0)
    served = fork_worker
    @policy.ready(served.pid)
    assert_nil @policy.exited(served, EXIT, 0)
    assert_nil @policy.exited(fork_worker, EXIT, 0, stopping: true)
    assert_nil @policy.allowance(0)
  end

  def test_a_worker_gone_without_a_report_is_a_failure_with_its_status
    line = @policy.exited(fork_worker, Status.new("#<Process::Status: pid 101 SIGKILL (signal 9)>"), 0)
    assert_match(/failed to boot: exited before it was ready \(#<Process::Status: pid 101 SIGKILL/, line)
  end

  # before_fork raised, or the kernel refused the process: a failed round
  # with no pid to wait for.
  def test_a_failed_fork_holds_the_next_one_back_and_counts_towards_giving_up
    assert_equal "next attempt in 0.5s (attempt 2 of 3)", @policy.fork_failed("before_fork failed: db down", 10.0)
    assert_equal 0, @policy.allowance(10.4)
    assert_equal 1, @policy.allowance(10.5)
    assert_equal "next attempt in 1s (attempt 3 of 3)", @policy.fork_failed("before_fork failed: db down", 10.5)
    assert_equal "giving up", @policy.fork_failed("before_fork failed: db down", 11.5)
    assert @policy.give_up?
    assert_equal "before_fork failed: db down", @policy.last_error
    @policy.ready(fork_worker.pid)
    assert_nil @policy.allowance(12), "a worker that serves ends the back-off"
    assert_equal "next attempt in 0.5s", @policy.fork_failed("fork failed: no room", 13)
  end

  def test_hup_resets_the_delay
    fail_boot(fork_worker, 0)
    @policy.reset
    assert_nil @policy.allowance(0)
  end
end
