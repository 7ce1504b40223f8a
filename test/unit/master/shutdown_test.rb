# frozen_string_literal: true

require "test_helper"
require "logger"
require "stringio"

# The master's stopping states: serving, draining (graceful TERM), stopping;
# which signals each still takes; when stragglers are killed.
class ShutdownTest < Minitest::Test
  def setup
    @log = StringIO.new
    @logger = Logger.new(@log)
    @config = Narwhal::Configurator.new
    @shutdown = Narwhal::Master::Shutdown.new
  end

  def test_without_term_graceful_term_stops_at_once
    refute @shutdown.drain(@config, @logger, 0.0)
    refute @shutdown.draining?
    @shutdown.stop(:TERM, @config, 0.0)
    assert @shutdown.draining?, "stopping is draining too: /ready says 503"
    assert_equal :TERM, @shutdown.signal
    assert_equal 0, @shutdown.exit_status
  end

  # A USR2 successor that gives up exits 1; a quicker stop after it keeps that.
  def test_the_first_stop_says_the_exit_status
    @shutdown.stop(:QUIT, @config, 0.0, exit_status: 1)
    @shutdown.stop(:TERM, @config, 1.0)
    assert_equal [:TERM, 1], [@shutdown.signal, @shutdown.exit_status]
  end

  def test_a_graceful_term_drains_for_the_delay_then_the_graceful_stop_is_due
    @config.settings.update(term_graceful: true, drain_delay: 5)
    assert @shutdown.drain(@config, @logger, 100.0)
    assert_includes @log.string, "TERM received: draining, serving for 5s (drain_delay), then stopping gracefully"
    assert @shutdown.draining?
    refute @shutdown.stopping?, "workers serve on"
    refute @shutdown.drain_over?(104.9)
    assert_in_delta 2.0, @shutdown.wait(103.0)
    assert @shutdown.drain_over?(105.0)
    refute @shutdown.drain(@config, @logger, 101.0), "a second TERM stops at once"
    @shutdown.stop(:QUIT, @config, 105.0)
    refute @shutdown.drain_over?(106.0)
    assert_nil @shutdown.wait(106.0)
  end

  def test_signals_taken_while_draining_and_stopping
    assert(%w[QUIT INT TERM USR1 USR2 HUP TTIN TTOU WINCH].all? { |sig| @shutdown.takes?(sig) })
    @config.settings.update(term_graceful: true, drain_delay: 5)
    @shutdown.drain(@config, @logger, 0.0)
    assert_equal %w[QUIT INT TERM USR1], %w[QUIT INT TERM USR1 USR2 HUP TTIN TTOU WINCH].select { |s| @shutdown.takes?(s) }
    @shutdown.stop(:QUIT, @config, 0.0)
    assert_equal %w[INT TERM], %w[QUIT INT TERM USR1 USR2 HUP].select { |s| @shutdown.takes?(s) }
  end

  def test_stragglers_get_kill_after_graceful_timeout_then_every_kill_after
    workers = [Narwhal::Worker.new(0).tap { |w| w.pid = 100 }]
    def workers.signal(worker, sig) = (@sent ||= []) << [worker.nr, sig]
    @config.settings[:timeout] = 20
    @shutdown.stop(:QUIT, @config, 0.0)
    @shutdown.kill_stragglers(workers, @logger, 29.9)
    assert_nil workers.instance_variable_get(:@sent), "timeout + 10 s by default"
    @shutdown.kill_stragglers(workers, @logger, 30.0)
    assert_equal [[0, :KILL]], workers.instance_variable_get(:@sent)
    assert_includes @log.string, "worker=0 pid=100 did not stop in time, killing"

    @config.settings[:graceful_timeout] = 3
    shutdown = Narwhal::Master::Shutdown.new
    shutdown.stop(:QUIT, @config, 0.0)
    shutdown.kill_stragglers(workers, @logger, 3.0)
    assert_equal 2, workers.instance_variable_get(:@sent).size, "graceful_timeout when set"
    shutdown.kill_stragglers(workers, @logger, 12.9)
    assert_equal 2, workers.instance_variable_get(:@sent).size
    shutdown.kill_stragglers(workers, @logger, 13.0)
    assert_equal 3, workers.instance_variable_get(:@sent).size, "again KILL_AFTER later"
  end
end
