# frozen_string_literal: true

require "test_helper"
require_relative "../../support/config_files"

# The directives as a config file gives them: the values they set, their
# checks, and errors that name the file and the line.
class ConfiguratorDSLTest < Minitest::Test
  include Narwhal::ConfigFiles

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

  def test_client_timeouts_are_validated_with_the_line
    assert_equal "2: client_header_timeout expects a number >= 0.001, got 0",
                 config_error("client_timeout 5\nclient_header_timeout 0\n")
    assert_equal "1: client_body_timeout expects a number >= 0.001, got \"30s\"",
                 config_error("client_body_timeout '30s'\n")
    assert_equal "1: client_timeout expects a number >= 0.001, got nil", config_error("client_timeout nil\n")
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

  def test_graceful_term_is_off_by_default
    c = Narwhal::Configurator.new
    assert_equal [false, 0, nil], c.settings.values_at(:term_graceful, :drain_delay, :graceful_timeout)
    c = config("term_graceful true\ndrain_delay 5\ngraceful_timeout 25\n")
    assert_equal [true, 5, 25], c.settings.values_at(:term_graceful, :drain_delay, :graceful_timeout)
  end

  def test_orca_load_report_is_off_by_default_and_true_or_false
    refute Narwhal::Configurator.new[:orca_load_report]
    assert config("orca_load_report true\n")[:orca_load_report]
    refute config("orca_load_report true\norca_load_report false\n")[:orca_load_report]
    assert_equal "2: orca_load_report expects true or false, got :text",
                 config_error("listen ':0'\norca_load_report :text\n")
    assert_equal "1: orca_load_report expects true or false, got nil", config_error("orca_load_report nil\n")
  end
end
