# frozen_string_literal: true

require "test_helper"

# The exceptions apps, hooks and config files see: their ancestry is what
# their `rescue` clauses rely on.
class NarwhalErrorsTest < Minitest::Test
  def test_client_gone_is_an_io_error_apps_already_rescue
    assert_operator Narwhal::ClientGone, :<, IOError
    assert_operator Narwhal::WriteTimeout, :<, Narwhal::ClientGone
    error = assert_raises(IOError) { raise Narwhal::WriteTimeout, "no bytes taken for 30s" }
    assert_equal "no bytes taken for 30s", error.message
  end

  # A soft timeout must pass through `rescue => e` (a retry loop, an API
  # call), as Timeout's and rack-timeout's do, and still run `ensure`.
  def test_request_timeout_passes_a_bare_rescue
    assert_operator Narwhal::RequestTimeout, :<, Exception
    refute_operator Narwhal::RequestTimeout, :<, StandardError
    cleaned = false
    caught = begin
      begin
        raise Narwhal::RequestTimeout
      rescue => e # rubocop:disable Style/RescueStandardError
        flunk "a bare rescue took it: #{e.class}"
      ensure
        cleaned = true
      end
    rescue Narwhal::RequestTimeout => e
      e
    end
    assert_kind_of Narwhal::RequestTimeout, caught
    assert cleaned
  end

  def test_fork_error_and_config_error
    assert_operator Narwhal::ForkError, :<, RuntimeError
    assert_operator Narwhal::ConfigError, :<, StandardError
    assert_raises(RuntimeError) { raise Narwhal::ForkError, "fork in a threaded worker" }
  end

  # Loaded from errors.rb on first use of any one of them, in a process
  # that has not used one yet.
  def test_each_is_autoloaded_from_errors_rb
    script = <<~'RUBY'
      require "narwhal"
      names = %i[ClientGone WriteTimeout RequestTimeout ForkError]
      puts names.map { |name| Narwhal.autoload?(name) }.uniq
      Narwhal::RequestTimeout
      puts $LOADED_FEATURES.grep(%r{/narwhal/errors[.]rb\z}).size
    RUBY
    out = IO.popen([RbConfig.ruby, "-I", File.expand_path("../../lib", __dir__), "-e", script], &:read)
    assert_equal "narwhal/errors\n1\n", out
  end
end
