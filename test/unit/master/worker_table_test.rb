# frozen_string_literal: true

require "test_helper"
require "logger"
require "stringio"

# The master's workers, with real forked children: what is forked, what
# the hooks see, what reaping clears and logs. Each test runs in a forked
# process playing the master: a master reaps any child of its own, and the
# test process has children of other tests (their servers).
class WorkerTableTest < Minitest::Test
  # The master's side of the scoreboard: which slots it cleared.
  ResetLog = Struct.new(:resets) do
    def reset(nr)
      resets << nr
    end

    def span=(_slots); end
  end

  def setup
    @log = StringIO.new
    @events = []
    @first_ready = 0
    @config = Narwhal::Configurator.new
    @config.settings[:logger] = Logger.new(@log)
    @config.settings[:before_fork] = ->(server, worker) { @events << [:before_fork, server, worker.nr] }
    @config.settings[:after_worker_exit] = lambda do |server, worker, status|
      @events << [:exit, server, worker.nr, status.exitstatus || status.termsig]
    end
    @board = ResetLog.new([])
    @hook_server = Object.new
  end

  # Runs the test's body in a child process; its assertions and failures
  # come back to this one.
  def as_master
    reader, writer = IO.pipe
    pid = fork do
      reader.close
      failure = begin
        yield
        nil
      rescue Exception => e # rubocop:disable Lint/RescueException
        assertion = e.is_a?(Minitest::Assertion)
        [assertion, assertion ? e.message : "#{e.class}: #{e.message}", e.backtrace]
      end
      @table&.each { |worker| Process.kill(:KILL, worker.pid) if Process.wait(worker.pid, Process::WNOHANG).nil? }
      Process.waitall # this process's own children: the workers
      writer.write(Marshal.dump([failure, assertions]))
      exit!(0)
    end
    writer.close
    report = reader.read
    Process.wait(pid)
    flunk "the process playing the master died" if report.empty?
    failure, self.assertions = Marshal.load(report) # rubocop:disable Security/MarshalLoad
    return unless failure

    assertion, message, backtrace = failure
    raise (assertion ? Minitest::Assertion : RuntimeError), message, backtrace
  ensure
    reader&.close
  end

  # child: the body of each forked worker (never returns)
  def table(&child)
    @table = Narwhal::Master::WorkerTable.new(@config, @board, @hook_server,
                                              on_first_ready: -> { @first_ready += 1 }, &child)
  end

  # A worker that is ready (and says so on @up too) until QUIT.
  def serving_worker
    @up, up = IO.pipe
    table do |_worker, reports|
      trap(:QUIT) { exit!(0) }
      reports.ready
      up.write(".")
      sleep
    end
  end

  def wait_up(count)
    seen = +""
    wait_until(timeout: 15, message: "#{count} workers up") do
      chunk = @up.read_nonblock(16, exception: false)
      seen << chunk if chunk.is_a?(String)
      seen.size >= count
    end
  end

  def reap_until(message, &done)
    wait_until(timeout: 15, message: message) do
      @table.reap(stopping: false) { |pid, _| flunk "an unknown child #{pid}" }
      done.call
    end
  end

  def test_forks_the_missing_numbers_reaps_them_and_runs_the_hooks
    as_master do
      serving_worker.spawn_missing(2)
      assert_equal [0, 1], @table.map(&:nr)
      assert_equal [[:before_fork, @hook_server, 0], [:before_fork, @hook_server, 1]], @events
      assert_equal [0, 1], @board.resets, "each slot is cleared before its worker is forked"
      wait_up(2) # QUIT's handler in place in both
      @table.read_reports
      assert_equal 1, @first_ready
      @table.spawn_missing(2)
      assert_equal 2, @table.count, "no number is missing"

      @table.retire_beyond(1)
      reap_until("worker 1 reaped") { @table.map(&:nr) == [0] }
      assert_equal [:exit, @hook_server, 1, 0], @events.last
      assert_equal [0, 1, 1], @board.resets, "the reaped worker's slot is cleared"

      @table.signal_all(:QUIT)
      reap_until("every worker reaped") { @table.empty? }
      assert_equal 1, @first_ready, "only the first ready worker ever counts"
      assert_empty @log.string, "workers that were ready and told to stop are not failures"
    end
  end

  # /metrics counts a fork that replaces a worker that exited, not the
  # first forks nor those after the master started stopping.
  def test_respawns_are_counted_in_the_tally
    as_master do
      tally = Narwhal::Master::Tally.new
      @up, up = IO.pipe
      @table = Narwhal::Master::WorkerTable.new(@config, @board, @hook_server, on_first_ready: -> {},
                                                                             tally: tally) do |_worker, reports|
        trap(:QUIT) { exit!(0) }
        reports.ready
        up.write(".")
        sleep
      end
      @table.spawn_missing(2)
      wait_up(2)
      assert_equal 0, tally[:respawns], "the first forks are not respawns"
      @table.signal(@table.find { |w| w.nr == 1 }, :KILL)
      reap_until("worker 1 reaped") { @table.map(&:nr) == [0] }
      @table.spawn_missing(2)
      assert_equal 1, tally[:respawns]
      @table.spawn_missing(2)
      assert_equal 1, tally[:respawns], "nothing was missing"
      wait_up(1)
      @table.signal_all(:QUIT)
      reap_until("every worker reaped") { @table.map(&:nr).empty? }
    end
  end

  def test_a_child_that_is_not_a_worker_is_handed_back
    as_master do
      table { exit!(0) }
      pid = fork { exit!(7) }
      reaped = nil
      wait_until(timeout: 15, message: "the child reaped") do
        @table.reap(stopping: false) { |child, status| reaped = [child, status.exitstatus] }
        reaped
      end
      assert_equal [pid, 7], reaped
    end
  end

  def test_a_failed_boot_is_logged_and_holds_the_next_fork_back
    as_master do
      table do |_worker, reports|
        reports.boot_failed("config.ru:1: uninitialized constant Foo (NameError)")
        exit!(Narwhal::WorkerProcess::BOOT_FAILED)
      end
      @table.spawn_missing(1)
      assert_nil @table.last_boot_error
      first = @table.first.pid
      reap_until("the failed worker reaped") { @table.empty? }
      assert_includes @log.string, "worker=0 pid=#{first} failed to boot: config.ru:1: uninitialized constant Foo " \
                                   "(NameError); 1 failure(s) in a row, next attempt in 0.5s (attempt 2 of 3)"
      assert_equal "config.ru:1: uninitialized constant Foo (NameError)", @table.last_boot_error, "for USR2's verdict"
      @table.spawn_missing(1)
      assert @table.empty?, "no fork before the delay is over"
      assert_operator @table.respawn_wait, :>, 0
      assert_nil @table.give_up_reason
      @table.reset_respawn
      @table.spawn_missing(1)
      assert_equal [0], @table.map(&:nr), "HUP: tried again at once"
    end
  end

  # A replacement forked while its predecessor serves gets a number of its
  # own and holds the predecessor's place: TTOU retires it by place, and a
  # worker forked for a place whose number a stand-in has gets a spare one.
  def test_a_stand_in_takes_a_spare_number_and_holds_its_predecessors_place
    as_master do
      serving_worker.spawn_missing(2)
      old = @table.find { |w| w.nr == 1 }
      stand_in = @table.spawn_stand_in(old, from: 2)
      assert_equal [2, 1], [stand_in.nr, stand_in.place]
      assert_equal [:before_fork, @hook_server, 2], @events.last, "the hooks see its own number"
      wait_up(3)
      @table.read_reports
      assert stand_in.ready, "its ready report is noted"
      @table.signal(old, :QUIT)
      reap_until("the old worker reaped") { !@table.alive?(old) }
      @table.spawn_missing(2)
      assert_equal [0, 2], @table.map(&:nr).sort, "place 1 is held: nothing forked for it"

      again = @table.spawn_stand_in(stand_in, from: 2)
      assert_equal [1, 1], [again.nr, again.place], "its place's own number is free again"
      wait_up(1) # its QUIT handler in place: until then a new worker ignores QUIT
      @table.retire_beyond(1)
      reap_until("place 1's workers retired") { @table.map(&:nr) == [0] }

      @table.spawn_missing(3)
      wait_up(2) # the two new ones
      two = @table.find { |w| w.nr == 2 }
      stand_in = @table.spawn_stand_in(two, from: 3)
      assert_equal [3, 2], [stand_in.nr, stand_in.place]
      @table.signal(two, :QUIT)
      reap_until("worker 2 reaped") { !@table.alive?(two) }
      @table.spawn_missing(4) # TTIN: place 3 is free, number 3 is not
      assert_equal [[0, 0], [1, 1], [3, 2], [4, 3]], @table.map { |w| [w.nr, w.place] }.sort
      assert_equal 5, @table.number_for(0, 4), "a spare number: the lowest free from `from` up"
      assert_equal 2, @table.number_for(2, 4), "a place's own number while it is free"
    end
  end

  # The master's loop must outlive a hook or fork that fails: the place
  # stays empty (its slot cleared), the failure is logged once with the
  # step's name, and the place is tried again after the respawn delay.
  def test_a_before_fork_that_raises_leaves_the_place_empty_until_a_later_pass
    as_master do
      calls = 0
      @config.settings[:before_fork] = lambda do |_server, worker|
        calls += 1
        raise "database is down" if calls == 2
        @events << [:before_fork, worker.nr]
      end
      serving_worker.spawn_missing(3)
      assert_equal [0], @table.map(&:nr), "worker 1 not forked, and worker 2 waits for the delay"
      assert_equal [0, 1, 1], @board.resets, "the failed place's slot is cleared again"
      assert_includes @log.string,
                      " -- : worker=1 before_fork failed: database is down; not forked, next attempt in 0.5s " \
                      "(attempt 2 of 3)\n"
      assert_equal 1, @log.string.scan("database is down").size
      assert_operator @table.respawn_wait, :>, 0
      @table.spawn_missing(3)
      assert_equal [0], @table.map(&:nr), "not before the delay"
      wait_until(timeout: 5, message: "the delay over") { @table.respawn_wait.nil? }
      wait_up(1)
      @table.read_reports # worker 0 serves: the back-off ends
      @table.spawn_missing(3)
      assert_equal [0, 1, 2], @table.map(&:nr), "tried again on a later pass"
      assert_equal 1, @log.string.scan("database is down").size
      wait_up(2)
      @table.signal_all(:QUIT)
      reap_until("every worker reaped") { @table.empty? }
    end
  end

  def test_a_fork_that_fails_is_logged_and_nothing_is_added
    as_master do
      forker = Object.new
      def forker.fork = raise(Errno::ENOMEM, "fork(2)")
      @table = Narwhal::Master::WorkerTable.new(@config, @board, @hook_server, on_first_ready: -> {},
                                                                             forker: forker) { exit!(0) }
      assert_nil @table.spawn_stand_in(Narwhal::Worker.new(0).tap { |w| w.pid = 1 }, from: 1)
      assert @table.empty?
      line = "worker=0 fork failed: fork(2): cannot allocate memory; not forked, next attempt in 0.5s " \
             "(attempt 2 of 3)\n"
      assert @log.string.end_with?(line), @log.string
      assert_equal 1, @log.string.lines.size, "no backtrace: it points at the master's code"
    end
  end

  def test_an_after_worker_exit_that_raises_is_logged_and_every_exited_worker_is_still_reaped
    as_master do
      @config.settings[:after_worker_exit] = ->(_server, worker, _status) { raise "pager down for #{worker.nr}" }
      serving_worker.spawn_missing(2)
      wait_up(2)
      pids = @table.map(&:pid)
      @table.signal_all(:KILL)
      wait_until(timeout: 15, message: "both dead") do
        pids.all? { |pid| File.read("/proc/#{pid}/stat").include?(") Z ") }
      end
      @table.reap(stopping: false) { |pid, _| flunk "an unknown child #{pid}" }
      assert @table.empty?, "both reaped in one pass"
      assert_match(/ -- : worker=0 pid=#{pids[0]} after_worker_exit failed: pager down for 0\n/, @log.string)
      assert_match(/ -- : worker=1 pid=#{pids[1]} after_worker_exit failed: pager down for 1\n/, @log.string)
    end
  end

  # A worker a soft timeout interrupted asks to be replaced: the master's
  # callback gets that worker (Master hands it to its Recycler).
  def test_a_retire_report_hands_the_worker_to_on_retire
    as_master do
      asked = []
      on_retire = ->(w) { asked << w }
      @table = Narwhal::Master::WorkerTable.new(@config, @board, @hook_server, on_first_ready: -> {},
                                                                             on_retire: on_retire) do |_w, reports|
        trap(:QUIT) { exit!(0) }
        reports.retire
        sleep
      end
      @table.spawn_missing(1)
      worker = @table.first
      wait_until(timeout: 15, message: "the report read") do
        @table.read_reports
        asked.any?
      end
      assert_equal [worker], asked
      assert_same worker, asked.first
      @table.signal_all(:QUIT)
      reap_until("the worker reaped") { @table.empty? }
    end
  end
end
