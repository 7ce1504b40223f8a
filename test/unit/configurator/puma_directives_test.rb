# frozen_string_literal: true

require "test_helper"
require_relative "../../support/config_files"

# Puma's directives in a narwhal config: each an error that says what to
# write instead, a whole config/puma.rb reported in one run.
class ConfiguratorPumaDirectivesTest < Minitest::Test
  include Narwhal::ConfigFiles

  # A config/puma.rb as Rails generates and people extend it: every line
  # narwhal cannot take is reported in the one run, each at its line.
  PUMA_RB = <<~RUBY
    max_threads_count = ENV.fetch("RAILS_MAX_THREADS", 5)
    min_threads_count = ENV.fetch("RAILS_MIN_THREADS") { max_threads_count }
    threads min_threads_count, max_threads_count
    worker_timeout 3600 if ENV.fetch("RAILS_ENV", "development") == "development"
    port ENV.fetch("PORT", 3000)
    environment ENV.fetch("RAILS_ENV") { "development" }
    pidfile ENV.fetch("PIDFILE") { "tmp/pids/server.pid" }
    workers ENV.fetch("WEB_CONCURRENCY") { 2 }
    preload_app!
    nakayoshi_fork
    before_fork do
      ActiveRecord::Base.connection_pool.disconnect! if defined?(ActiveRecord)
    end
    on_worker_boot do
      ActiveRecord::Base.establish_connection if defined?(ActiveRecord)
    end
    keepalive_timout 20
    plugin :tmp_restart
    activate_control_app "tcp://127.0.0.1:9293"
    timeout 30
  RUBY

  def test_puma_directives_name_the_narwhal_equivalent
    {
      "workers ENV.fetch('WEB_CONCURRENCY') { 3 }" => "workers is a Puma directive: use worker_processes 3",
      "port ENV.fetch('PORT', 3000)" => 'port is a Puma directive: use listen ":3000" (on the command line: ' \
                                        "-o 0.0.0.0 -p 3000)",
      "port 3000, '127.0.0.1'" => 'port is a Puma directive: use listen "127.0.0.1:3000" (on the command line: ' \
                                  "-l 127.0.0.1:3000)",
      "bind 'tcp://0.0.0.0:9292'" => 'bind is a Puma directive: use listen "0.0.0.0:9292"',
      "bind 'unix:///srv/app/tmp/puma.sock?backlog=512'" =>
        'bind is a Puma directive: use listen "/srv/app/tmp/puma.sock", backlog: 512',
      "environment 'production'" => "environment is a Puma directive: use -E production on the command line " \
                                    "(it sets RACK_ENV)",
      "pidfile 'tmp/pids/server.pid'" => 'pidfile is a Puma directive: use pid "tmp/pids/server.pid"',
      "stdout_redirect 'log/out.log', 'log/err.log', true" =>
        'stdout_redirect is a Puma directive: use stdout_path "log/out.log" and stderr_path "log/err.log" ' \
        "(narwhal always appends)",
      "preload_app!" => "preload_app! is a Puma directive: use preload_app true",
      "on_worker_boot { }" => "on_worker_boot is a Puma directive: use after_fork { |server, worker| ... } " \
                              "(runs in each worker right after the fork, before it loads the app)",
      "worker_timeout 60" => "worker_timeout is a Puma directive: use timeout 60 (a worker on one request for " \
                             "longer is killed)",
      "plugin :tmp_restart" => "plugin is a Puma directive: narwhal has no plugins; for tmp_restart send USR2 " \
                               "(new code, no downtime) or HUP to the master"
    }.each do |line, message|
      assert_equal "2: #{message}", config_error("listen ':0'\n#{line}\n"), line
    end
  end

  def test_every_puma_directive_has_advice_and_none_is_a_narwhal_directive
    directives = Narwhal::Configurator::DSL.directives
    Narwhal::Configurator::PumaDirectives::ADVICE.each_key do |name|
      refute_includes directives, name
      assert_match(/\A1: #{Regexp.escape(name.to_s)} is a Puma directive: \S/, config_error("#{name}\n"))
    end
  end

  def test_every_problem_of_a_puma_config_in_one_run
    lines = config_error(PUMA_RB).split("\n").map { |line| line.delete_prefix(@path_prefix) }
    assert_equal [
      "4: worker_timeout is a Puma directive: use timeout 3600 (a worker on one request for longer is killed)",
      '5: port is a Puma directive: use listen ":3000" (on the command line: -o 0.0.0.0 -p 3000)',
      "6: environment is a Puma directive: use -E development on the command line (it sets RACK_ENV)",
      '7: pidfile is a Puma directive: use pid "tmp/pids/server.pid"',
      "8: workers is a Puma directive: use worker_processes 2",
      "9: preload_app! is a Puma directive: use preload_app true",
      "10: nakayoshi_fork is a Puma directive: with preload_app true, call GC.compact (Ruby 3.3+: " \
      "Process.warmup) in before_fork { |server, worker| ... }, which runs in the master before each fork",
      "11: before_fork has invalid arity 0 (needs 2: |server, worker|): Puma's before_fork runs once; narwhal's " \
      "runs in the master before every fork, respawns included (write before_fork do |server, worker| ... end; " \
      "closing database connections there is right to repeat)",
      "14: on_worker_boot is a Puma directive: use after_fork { |server, worker| ... } (runs in each worker " \
      "right after the fork; with preload_app the app is loaded already: reconnect to databases here)",
      "17: unknown directive keepalive_timout (did you mean keepalive_timeout?)",
      "18: plugin is a Puma directive: narwhal has no plugins; for tmp_restart send USR2 (new code, no downtime) " \
      "or HUP to the master",
      '19: activate_control_app is a Puma directive: use control_listen "127.0.0.1:9293" (GET /status, ' \
      "/metrics, /health, /ready; narwhal status prints /status); stop, restart and reload with signals to the " \
      "master (docs/SIGNALS.md)"
    ], lines
  end

  def test_on_worker_boot_says_when_after_fork_runs_with_and_without_preload
    assert_equal "1: on_worker_boot is a Puma directive: use after_fork { |server, worker| ... } (runs in each " \
                 "worker right after the fork, before it loads the app)", config_error("on_worker_boot { }\n")
    with_preload = "2: on_worker_boot is a Puma directive: use after_fork { |server, worker| ... } (runs in each " \
                   "worker right after the fork; with preload_app the app is loaded already: reconnect to " \
                   "databases here)"
    assert_equal with_preload, config_error("preload_app true\non_worker_boot { }\n")
    assert_equal with_preload, config_error("listen ':0'\non_worker_boot { }\npreload_app true\n"), "in any order"
  end

  # Puma's bind URLs as listen lines: TLS refused with the way round it,
  # a relative Unix path kept relative, the query options listen shares.
  def test_bind_urls_become_listen_lines
    puma = Narwhal::Configurator::PumaDirectives
    assert_equal "bind is a Puma directive: #{puma::NO_TLS}", puma.advice(:bind, ["ssl://0.0.0.0:9292?key=k"])
    assert_equal 'bind is a Puma directive: use listen "./tmp/puma.sock", umask: 0o77',
                 puma.advice(:bind, ["unix://tmp/puma.sock?umask=0077"])
    assert_equal 'bind is a Puma directive: use listen "127.0.0.1:3000", tcp_nodelay: false, backlog: 16',
                 puma.advice(:bind, ["tcp://127.0.0.1:3000?low_latency=false&backlog=16&reuse_port=true"])
    assert_equal 'port is a Puma directive: use listen "[::1]:3000" (on the command line: -l [::1]:3000)',
                 puma.advice(:port, [3000, "::1"])
  end

  def test_a_name_that_is_not_pumas_gets_no_advice
    assert_nil Narwhal::Configurator::PumaDirectives.advice(:frobnicate, [])
    assert_nil Narwhal::Configurator::PumaDirectives.advice(:worker_processes, [2])
  end
end
