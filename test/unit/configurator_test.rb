# frozen_string_literal: true

require "test_helper"

class ConfiguratorTest < Minitest::Test
  def write_config(text)
    @dir = Dir.mktmpdir
    path = File.join(@dir, "narwhal.rb")
    File.write(path, text)
    path
  end

  def teardown
    FileUtils.rm_rf(@dir) if @dir
  end

  def test_defaults
    c = Narwhal::Configurator.new
    assert_equal 112 * 1024, c[:client_body_buffer_size]
    assert_equal 5, c[:keepalive_timeout]
    assert_equal [["127.0.0.1:8080", {}]], c.listeners
  end

  def test_directives_set_values
    c = Narwhal::Configurator.new(file: write_config(<<~RUBY))
      listen "127.0.0.1:9000", backlog: 64
      listen "/tmp/x.sock"
      keepalive_timeout 2.5
      client_max_body_size nil
      early_hints true
    RUBY
    assert_equal [["127.0.0.1:9000", { backlog: 64 }], ["/tmp/x.sock", {}]], c.listeners
    assert_equal 2.5, c[:keepalive_timeout]
    assert_nil c[:client_max_body_size]
    assert c[:early_hints]
  end

  def config(text)
    Narwhal::Configurator.new(file: write_config(text))
  end

  def client_timeouts(c)
    [c[:client_header_timeout], c[:client_body_timeout]]
  end

  def test_client_timeout_parts_default_to_the_umbrella
    assert_equal [30, 30], client_timeouts(Narwhal::Configurator.new)
    assert_equal [7, 7], client_timeouts(config("client_timeout 7\n"))
  end

  def test_a_client_timeout_part_given_on_its_own_wins_in_either_order
    assert_equal [2, 7], client_timeouts(config("client_header_timeout 2\nclient_timeout 7\n"))
    assert_equal [2, 7], client_timeouts(config("client_timeout 7\nclient_header_timeout 2\n"))
    assert_equal [7, 0.5], client_timeouts(config("client_body_timeout 0.5\nclient_timeout 7\n"))
    assert_equal [7, 0.5], client_timeouts(config("client_timeout 7\nclient_body_timeout 0.5\n"))
    assert_equal [2, 60], client_timeouts(config("client_body_timeout 60\nclient_header_timeout 2\n"))
    assert_equal [2, 30], client_timeouts(config("client_header_timeout 2\n")), "the other keeps the default"
  end

  def test_client_timeouts_are_validated_with_the_line
    assert_equal "2: client_header_timeout expects a number >= 0.001, got 0",
                 config_error("client_timeout 5\nclient_header_timeout 0\n")
    assert_equal "1: client_body_timeout expects a number >= 0.001, got \"30s\"",
                 config_error("client_body_timeout '30s'\n")
    assert_equal "1: client_timeout expects a number >= 0.001, got nil", config_error("client_timeout nil\n")
  end

  def config_error(text)
    @path = write_config(text)
    @path_prefix = "#{@path}:"
    e = assert_raises(Narwhal::ConfigError) { Narwhal::Configurator.new(file: @path) }
    e.message.delete_prefix(@path_prefix)
  end

  def test_unknown_directive_names_file_and_line_and_the_nearest_directive
    assert_equal "3: unknown directive worker_processs (did you mean worker_processes?)",
                 config_error("keepalive_timeout 1\n\nworker_processs 4\n")
    assert_equal "1: unknown directive keepalive_timout (did you mean keepalive_timeout?)",
                 config_error("keepalive_timout 5\n")
    assert_equal "1: unknown directive frobnicate", config_error("frobnicate\n")
  end

  def test_threads_and_their_limits
    assert_equal 1, Narwhal::Configurator.new[:threads], "Unicorn's one request per worker by default"
    assert_equal 5, Narwhal::Configurator.new(file: write_config("threads 5\n"))[:threads]
    assert_equal 5, Narwhal::Configurator.new(file: write_config("threads 5, 5\n"))[:threads], "Puma's form"
    assert_equal "1: narwhal runs a fixed number of threads per worker: use threads 16", config_error("threads 0, 16\n")
    assert_equal "2: threads expects an Integer from 1 to 256, got 0", config_error("\nthreads 0\n")
    assert_equal 'threads expects an Integer from 1 to 256, got "4x"', config_error('threads "4x"').sub(/\A\d+: /, "")
    assert_equal "1: threads expects an Integer from 1 to 256, got 257", config_error("threads 257\n")
    assert_equal "2: worker_processes 64 x threads 65 is more than 4096 request threads",
                 config_error("worker_processes 64\nthreads 65\n")
    assert_equal "2: worker_processes 65 x threads 64 is more than 4096 request threads",
                 config_error("threads 64\nworker_processes 65\n")
    assert_nil Narwhal::Configurator.new[:worker_connections], "unset: from the descriptor limit"
    assert_equal "1: worker_connections expects an Integer >= 1, got 0", config_error("worker_connections 0\n")
  end

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

  def test_control_listen_and_after_worker_timeout
    assert_nil Narwhal::Configurator.new[:control_listen], "off by default"
    c = Narwhal::Configurator.new(file: write_config(<<~RUBY))
      control_listen "127.0.0.1:9394"
      after_worker_timeout { |server, worker, info| }
    RUBY
    assert_equal "127.0.0.1:9394", c[:control_listen]
    assert_respond_to c[:after_worker_timeout], :call
    assert_equal "/run/n.sock", Narwhal::Configurator.new(file: write_config("control_listen '/run/n.sock'\n"))[:control_listen]
    assert_equal "1: control_listen: invalid listen address \"nope:port\" (use #{Narwhal::Listener::FORMS})",
                 config_error("control_listen 'nope:port'\n")
    assert_equal "1: control_listen expects an address String (or nil: none), got true", config_error("control_listen true\n")
    assert_equal "1: after_worker_timeout has invalid arity 2 (needs 3: |server, worker, info|)",
                 config_error("after_worker_timeout { |server, worker| }\n")
  end

  def test_puma_style_before_fork_says_what_narwhal_runs
    assert_equal "1: before_fork has invalid arity 0 (needs 2: |server, worker|): Puma's before_fork runs once; " \
                 "narwhal's runs in the master before every fork, respawns included (write before_fork do |server, " \
                 "worker| ... end; closing database connections there is right to repeat)",
                 config_error("before_fork do\nend\n")
  end

  def test_ruby_errors_read_without_class_names
    assert_equal "2: uninitialized constant Fooo", config_error("listen ':0'\nx = Fooo\n")
    assert_equal "1: /nonexistent/secret: no such file or directory", config_error("File.read('/nonexistent/secret')\n")
    assert_equal "1: key not found: \"NARWHAL_TEST_UNSET\"", config_error("ENV.fetch('NARWHAL_TEST_UNSET')\n")
    message = config_error("worker_processes 2 3\n")
    assert_match(/\A1: syntax error, unexpected integer literal/, message)
    refute_match(/SyntaxError|NameError|Errno|KeyError/, message)
  end

  def test_unknown_user_or_group
    assert_equal "1: user nosuchuser-narwhal does not exist on this machine",
                 config_error("user 'nosuchuser-narwhal'\n")
    assert_equal "1: group nosuchgroup-narwhal does not exist on this machine",
                 config_error("user 'nobody', 'nosuchgroup-narwhal'\n")
  end

  def test_wrong_type_names_file_and_line
    path = write_config("\nclient_max_body_size \"10m\"\n")
    e = assert_raises(Narwhal::ConfigError) { Narwhal::Configurator.new(file: path) }
    assert_match(/#{Regexp.escape(path)}:2: client_max_body_size expects an Integer >= 1, got "10m"/, e.message)
  end

  def test_response_spool_sizes
    c = Narwhal::Configurator.new
    assert_equal 64 * 1024, c[:response_buffer_size]
    assert_equal 256 * 1024 * 1024, c[:response_spool_max]
    assert_equal [1 << 30, 4 << 30, 1 << 30],
                 c.settings.values_at(:response_spool_file_max, :response_spool_disk_max, :response_spool_disk_reserve)
    c = Narwhal::Configurator.new(file: write_config("response_buffer_size 0\nresponse_spool_max 0\n"))
    assert_equal [0, 0], [c[:response_buffer_size], c[:response_spool_max]]
    assert_equal "2: response_spool_max expects an Integer >= 0, got -1",
                 config_error("response_buffer_size 1024\nresponse_spool_max(-1)\n")
  end

  def test_response_spool_disk_limits
    text = "response_spool_file_max 8 * 1024 * 1024\nresponse_spool_disk_max 0\nresponse_spool_disk_reserve 2**30\n"
    c = Narwhal::Configurator.new(file: write_config(text))
    assert_equal [8 << 20, 0, 1 << 30],
                 c.settings.values_at(:response_spool_file_max, :response_spool_disk_max, :response_spool_disk_reserve)
    assert_equal "1: response_spool_disk_reserve expects an Integer >= 0, got -1",
                 config_error("response_spool_disk_reserve(-1)\n")
  end

  def test_ruby_error_names_file_and_line
    path = write_config("x = 1\nraise 'boom'\n")
    e = assert_raises(Narwhal::ConfigError) { Narwhal::Configurator.new(file: path) }
    assert_match(/narwhal.rb:2: boom/, e.message)
  end

  def test_syntax_error_names_file
    path = write_config("listen '127.0.0.1:1'\nif\n")
    e = assert_raises(Narwhal::ConfigError) { Narwhal::Configurator.new(file: path) }
    assert_match(/narwhal.rb/, e.message)
  end

  def test_soft_timeout_is_off_by_default_and_below_timeout_in_any_order
    c = Narwhal::Configurator.new
    assert_nil c[:soft_timeout]
    refute c[:soft_timeout_keep_worker]
    c = Narwhal::Configurator.new(file: write_config("soft_timeout 20, keep_worker: true\ntimeout 30\n"))
    assert_equal [20, true], [c[:soft_timeout], c[:soft_timeout_keep_worker]]
    c = Narwhal::Configurator.new(file: write_config("timeout 5\nsoft_timeout 0.5\n"))
    assert_equal [0.5, false], [c[:soft_timeout], c[:soft_timeout_keep_worker]]
    assert_nil Narwhal::Configurator.new(file: write_config("soft_timeout 9\nsoft_timeout nil\n"))[:soft_timeout]
  end

  # The line is the soft_timeout's, even when the timeout it must stay
  # under comes later in the file (or is the default).
  def test_soft_timeout_errors_name_file_and_line
    below = "must be below timeout (%s): the master kills the worker at timeout, so the soft timeout would never come"
    assert_equal "2: soft_timeout 30 #{format(below, 30)}",
                 config_error("worker_processes 2\nsoft_timeout 30\ntimeout 30\n")
    assert_equal "1: soft_timeout 45 #{format(below, 10)}", config_error("soft_timeout 45\ntimeout 60\ntimeout 10\n")
    assert_equal "1: soft_timeout 60 #{format(below, 60)}", config_error("soft_timeout 60\n")
    assert_equal "3: soft_timeout expects a number of seconds > 0 (or nil: off), got 0",
                 config_error("timeout 10\n\nsoft_timeout 0\n")
    assert_equal "1: soft_timeout expects a number of seconds > 0 (or nil: off), got \"15s\"",
                 config_error("soft_timeout '15s'\n")
    assert_equal "1: soft_timeout's one option is keep_worker: true or false, got {:keep=>true}",
                 config_error("soft_timeout 5, keep: true\n")
    assert_equal "1: soft_timeout's one option is keep_worker: true or false, got {:keep_worker=>\"yes\"}",
                 config_error("soft_timeout 5, keep_worker: 'yes'\n")
  end

  def test_access_log_is_off_by_default_and_takes_a_path_and_a_format
    assert_nil Narwhal::Configurator.new[:access_log]
    path = write_config("access_log 'log/access.log'\naccess_log 'a.log', format: :json\n")
    File.write(path, "access_log 'a.log'\n")
    assert_equal [File.expand_path("a.log"), :combined], Narwhal::Configurator.new(file: path)[:access_log]
    File.write(path, "working_directory #{@dir.inspect}\naccess_log 'a.log', format: 'json'\naccess_log nil\n" \
                     "access_log 'b.log', format: :json\n")
    assert_equal [File.join(@dir, "b.log"), :json], Narwhal::Configurator.new(file: path)[:access_log]
  end

  def test_access_log_errors_name_file_and_line
    assert_equal "2: access_log format: must be :combined or :json, got :common",
                 config_error("\naccess_log 'a.log', format: :common\n")
    assert_equal "1: access_log's one option is format: :combined or :json, got {:fromat=>:json}",
                 config_error("access_log 'a.log', fromat: :json\n")
    assert_equal "1: access_log expects a path String (or nil: off), got :stdout", config_error("access_log :stdout\n")
    assert_equal "1: access_log /nonexistent/dir/a.log: its directory /nonexistent/dir does not exist",
                 config_error("access_log '/nonexistent/dir/a.log'\n")
    assert_equal "1: access_log #{@dir}: is a directory", config_error("access_log #{@dir.inspect}\n")
  end

  def test_unsupported_listen_option
    path = write_config("listen ':9000', tcp_nopushh: true\n")
    e = assert_raises(Narwhal::ConfigError) { Narwhal::Configurator.new(file: path) }
    assert_match(/:1: unknown listen option tcp_nopushh \(did you mean tcp_nopush\?\)\z/, e.message)
  end

  def test_missing_file
    e = assert_raises(Narwhal::ConfigError) { Narwhal::Configurator.new(file: "/nonexistent/narwhal.rb") }
    assert_equal "cannot read config file /nonexistent/narwhal.rb: no such file or directory", e.message
  end

  def test_unicorn_only_directives_and_listen_options_are_accepted
    path = write_config(<<~CONF)
      listeners ["127.0.0.1:9001", "/tmp/narwhal-x.sock"]
      listen 9002, tcp_defer_accept: true, accept_filter: "httpready", tcp_nopush: true
      trust_x_forwarded false
    CONF
    config = Narwhal::Configurator.new(file: path)
    assert_equal ["127.0.0.1:9001", "/tmp/narwhal-x.sock", "9002"], config.listeners.map(&:first)
    assert_equal false, config[:trust_x_forwarded]
  end

  def test_worker_limits_are_off_by_default_and_read_sizes_as_written
    c = Narwhal::Configurator.new
    assert_nil c[:worker_memory_limit]
    assert_nil c[:worker_max_requests]
    c = config("worker_memory_limit \"1.5G\", pss: true, interval: 0.5\nworker_max_requests 1000\n")
    assert_equal [1536 * 1024 * 1024, true, 0.5], c.settings.values_at(:worker_memory_limit, :worker_memory_pss,
                                                                       :worker_memory_check_interval)
    assert_equal [1000, 100], [c[:worker_max_requests], c[:worker_max_requests_jitter]], "jitter: N / 10"
    c = config("worker_memory_limit 268435456\nworker_max_requests 500, jitter: 0\n")
    assert_equal [268_435_456, false, 5], c.settings.values_at(:worker_memory_limit, :worker_memory_pss,
                                                               :worker_memory_check_interval)
    assert_equal [500, 0], [c[:worker_max_requests], c[:worker_max_requests_jitter]]
  end

  def test_worker_limits_refuse_what_they_cannot_mean
    {
      "worker_memory_limit \"512 parsecs\"" => "worker_memory_limit expects bytes >= 1048576 (an Integer or a size " \
                                              "like \"512MB\"; nil: off), got \"512 parsecs\"",
      "worker_memory_limit 512" => "worker_memory_limit expects bytes >= 1048576 (an Integer or a size like " \
                                   "\"512MB\"; nil: off), got 512",
      "worker_memory_limit \"1G\", rss: true" => "worker_memory_limit's options are pss: and interval:, got " \
                                               "{:rss=>true}",
      "worker_memory_limit \"1G\", interval: 0" => "worker_memory_limit interval: expects seconds >= 0.1, got 0",
      "worker_max_requests 0" => "worker_max_requests expects an Integer >= 1 (nil: off), got 0",
      "worker_max_requests 10, jitter: -1" => "worker_max_requests jitter: expects an Integer >= 0, got -1",
      "term_graceful :yes" => "term_graceful expects true or false, got :yes",
      "drain_delay -1" => "drain_delay expects a number >= 0, got -1",
      "graceful_timeout 0" => "graceful_timeout expects a number >= 0.001, got 0"
    }.each do |line, message|
      assert_equal "2: #{message}", config_error("listen ':0'\n#{line}\n"), line
    end
  end

  def test_graceful_term_is_off_by_default
    c = Narwhal::Configurator.new
    assert_equal [false, 0, nil], c.settings.values_at(:term_graceful, :drain_delay, :graceful_timeout)
    c = config("term_graceful true\ndrain_delay 5\ngraceful_timeout 25\n")
    assert_equal [true, 5, 25], c.settings.values_at(:term_graceful, :drain_delay, :graceful_timeout)
  end
  # What ENV.fetch gives: a String, wherever the directive wants a number.
  def test_numbers_from_the_environment_are_read_as_numbers
    env = { "RAILS_MAX_THREADS" => "5", "WEB_CONCURRENCY" => "3", "TIMEOUT" => "2.5", "BODY" => "1048576",
            "JITTER" => " 4 ", "BACKLOG" => "64", "SOFT" => "1.5" }
    c = config(<<~RUBY)
      env = #{env.inspect}
      threads env.fetch("RAILS_MAX_THREADS", 3)
      worker_processes env.fetch("WEB_CONCURRENCY", 2)
      timeout env.fetch("TIMEOUT")
      soft_timeout env.fetch("SOFT")
      keepalive_timeout "0"
      client_max_body_size env.fetch("BODY")
      worker_connections "100"
      worker_max_requests "500", jitter: env.fetch("JITTER")
      listen "127.0.0.1:0", backlog: env.fetch("BACKLOG")
    RUBY
    assert_equal [5, 3, 2.5, 1.5, 0, 1_048_576, 100], c.settings.values_at(:threads, :worker_processes, :timeout,
                                                                          :soft_timeout, :keepalive_timeout,
                                                                          :client_max_body_size, :worker_connections)
    assert_equal [500, 4], c.settings.values_at(:worker_max_requests, :worker_max_requests_jitter)
    assert_equal [["127.0.0.1:0", { backlog: 64 }]], c.listeners
    assert_equal 5, config("threads '5', '5'\n")[:threads], "Puma's form"
  end

  # A number read from a String is checked as the number; a String that is
  # no number is refused as it came.
  def test_number_strings_keep_the_range_checks_and_the_line
    assert_equal "2: threads expects an Integer from 1 to 256, got 0", config_error("\nthreads '0'\n")
    assert_equal '1: threads expects an Integer from 1 to 256, got "5.5"', config_error("threads '5.5'\n")
    assert_equal '1: worker_processes expects an Integer >= 1 or :auto, got "two"',
                 config_error("worker_processes 'two'\n")
    assert_equal "2: worker_processes 64 x threads 65 is more than 4096 request threads",
                 config_error("worker_processes '64'\nthreads '65'\n")
    assert_equal "1: timeout expects a number >= 0.001, got 0", config_error("timeout '0'\n")
    assert_equal '1: keepalive_timeout expects a number >= 0, got "5s"', config_error("keepalive_timeout '5s'\n")
    assert_equal '1: worker_connections expects an Integer >= 1, got ""', config_error("worker_connections ''\n")
    assert_equal "1: listen option backlog: invalid value -1", config_error("listen ':0', backlog: '-1'\n")
    refute_nil config("worker_processes 'auto'\n")[:worker_processes_auto], "as WEB_CONCURRENCY=auto"
  end
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

  def test_problems_before_a_ruby_error_are_reported_with_it
    message = config_error("frobnicate\nworkers 3\nthreads 2\nx = Fooo\nworkerz 9\n")
    assert_equal "1: unknown directive frobnicate\n#{@path}:2: workers is a Puma directive: use worker_processes 3" \
                 "\n#{@path}:4: uninitialized constant Fooo", message
    message = config_error("threads 0\nsoft_timeout 90\n")
    assert_equal "1: threads expects an Integer from 1 to 256, got 0\n#{@path}:2: soft_timeout 90 must be below " \
                 "timeout (60): the master kills the worker at timeout, so the soft timeout would never come", message
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
  # Relative paths mean the directory the server runs in, wherever the
  # file sets working_directory; without one, the start directory.
  def test_relative_paths_are_resolved_against_working_directory_given_later
    path = write_config("")
    app = File.join(@dir, "app")
    FileUtils.mkdir_p(File.join(app, "log"))
    File.write(path, <<~RUBY)
      access_log "log/access.log", format: :json
      pid "narwhal.pid"
      stderr_path "log/err.log"
      stdout_path "log/out.log"
      working_directory #{app.inspect}
    RUBY
    c = Narwhal::Configurator.new(file: path)
    assert_equal [File.join(app, "log/access.log"), :json], c[:access_log]
    assert_equal [File.join(app, "narwhal.pid"), File.join(app, "log/err.log"), File.join(app, "log/out.log")],
                 c.settings.values_at(:pid, :stderr_path, :stdout_path)
    File.write(path, "pid 'narwhal.pid'\naccess_log '/abs/../tmp/a.log'\n")
    c = Narwhal::Configurator.new(file: path)
    assert_equal [File.expand_path("narwhal.pid"), "/tmp/a.log"], [c[:pid], c[:access_log].first]
  end

  def test_an_access_log_directory_is_checked_in_working_directory_at_its_own_line
    app = Dir.mktmpdir
    assert_equal "2: access_log #{app}/nolog/a.log: its directory #{app}/nolog does not exist",
                 config_error("listen ':0'\naccess_log 'nolog/a.log'\nworking_directory #{app.inspect}\n")
  ensure
    FileUtils.rm_rf(app)
  end
end
