# frozen_string_literal: true

require "minitest/autorun"
require "narwhal"
require_relative "../lib/bench"

# How the suite starts narwhal: the shape each narwhal gets for a scenario
# and the config file it is given, read back by narwhal's own configurator.
class ServersTest < Minitest::Test
  def launch_config(server, processes, threads)
    Dir.mktmpdir do |dir|
      p, t = server.shape(processes, threads)
      launch = Bench::Launch.new(app: File.join(Bench::APPS, "io.ru"), port: 8080, processes: p, threads: t,
                                 dir: dir, preload: true)
      _env, argv = server.command(launch)
      file = argv[argv.index("-c") + 1]
      yield File.read(file), Narwhal::Configurator.new(file: file)
    end
  end

  def test_narwhal_runs_processes_times_threads_like_puma
    narwhal = Bench::SERVERS.fetch("narwhal")
    assert_equal [2, 5], narwhal.shape(2, 5)
    assert_equal Bench::SERVERS.fetch("puma").shape(2, 5), narwhal.shape(2, 5)
    launch_config(narwhal, 2, 5) do |text, config|
      assert_includes text.lines, "threads 5\n"
      assert_equal 2, config[:worker_processes]
      assert_equal 5, config[:threads]
    end
  end

  def test_narwhal_with_one_thread_gets_unicorns_config
    launch_config(Bench::SERVERS.fetch("narwhal"), 2, 1) do |text, config|
      refute_match(/threads/, text)
      assert_equal 1, config[:threads]
    end
  end

  def test_baseline_stays_process_only
    Bench.add_baseline(Bench::ROOT)
    baseline = Bench::SERVERS.fetch("narwhal-baseline")
    assert_equal [10, 1], baseline.shape(2, 5)
    launch_config(baseline, 2, 5) do |text, config|
      refute_match(/threads/, text)
      assert_equal 10, config[:worker_processes]
    end
  ensure
    Bench::SERVERS.delete("narwhal-baseline")
  end

  def test_extra_narwhal_has_its_threads_in_every_scenario
    Bench.add_narwhal_threads(5)
    t5 = Bench::SERVERS.fetch("narwhal-t5")
    assert_equal [1, 5], t5.shape(1, 1)
    assert_equal [2, 5], t5.shape(2, 4)
    launch_config(t5, 1, 1) do |_text, config|
      assert_equal 1, config[:worker_processes]
      assert_equal 5, config[:threads]
    end
    assert_raises(ArgumentError) { Bench.add_narwhal_threads(1) }
  ensure
    Bench::SERVERS.delete("narwhal-t5")
  end

  def test_quit_table_runs_the_servers_with_a_graceful_stop
    quit = Bench.quit_scenario(Bench::QUICK)
    served = Bench::SERVERS.values.select { |s| quit.variants.first.serves?(s) }.map(&:name)
    assert_equal %w[narwhal puma unicorn pitchfork], served
    assert_equal "TERM", Bench::SERVERS.fetch("puma").quit
    assert quit.variants.all?(&:stops)
  end

  def test_proxies_send_to_both_backends
    Dir.mktmpdir do |dir|
      nginx = Bench::Proxy.new("nginx", backends: [9001, 9002], dir: dir).send(:nginx_config)
      assert_match(/server 127.0.0.1:9001;\s+server 127.0.0.1:9002;\s+keepalive 32;/, nginx)
      haproxy = Bench::Proxy.new("haproxy", backends: [9001, 9002], dir: dir).send(:haproxy_config)
      assert_includes haproxy, "  server b0 127.0.0.1:9001\n  server b1 127.0.0.1:9002"
      assert_includes haproxy, "option redispatch"
    end
  end
end
