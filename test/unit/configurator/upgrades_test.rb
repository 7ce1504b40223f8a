# frozen_string_literal: true

require "test_helper"
require_relative "../../support/config_files"

# upgrade_timeout, upgrade_health_path and upgrade_retire_old: off by
# default, read as written, and what they refuse (at the file's line).
class ConfiguratorUpgradesTest < Minitest::Test
  include Narwhal::ConfigFiles

  def test_upgrades_are_unguarded_by_default_as_in_unicorn
    c = Narwhal::Configurator.new
    assert_equal [nil, nil, {}, false],
                 c.settings.values_at(:upgrade_timeout, :upgrade_health_path, :upgrade_health_headers, :upgrade_retire_old)
  end

  def test_upgrade_directives_read_as_written
    c = config(<<~RUBY)
      upgrade_timeout ENV.fetch("NO_SUCH_VARIABLE", "45.5")
      upgrade_health_path "/up?deep=1", headers: { "Host" => "app.example", :"X-Forwarded-Proto" => "https" }
      upgrade_retire_old true
    RUBY
    assert_equal [45.5, "/up?deep=1", { "Host" => "app.example", "X-Forwarded-Proto" => "https" }, true],
                 c.settings.values_at(:upgrade_timeout, :upgrade_health_path, :upgrade_health_headers, :upgrade_retire_old)
    c = config("upgrade_timeout 30\nupgrade_timeout nil\nupgrade_health_path nil\n")
    assert_equal [nil, nil, {}], c.settings.values_at(:upgrade_timeout, :upgrade_health_path, :upgrade_health_headers)
  end

  def test_upgrade_directives_refuse_what_they_cannot_mean
    {
      "upgrade_timeout 0" => "upgrade_timeout expects a number of seconds > 0 (or nil: off), got 0",
      "upgrade_timeout \"soon\"" => "upgrade_timeout expects a number of seconds > 0 (or nil: off), got \"soon\"",
      "upgrade_health_path \"up\"" => "upgrade_health_path expects a path starting with / and without spaces " \
                                      "(or nil: off), got \"up\"",
      "upgrade_health_path \"/a b\"" => "upgrade_health_path expects a path starting with / and without spaces " \
                                        "(or nil: off), got \"/a b\"",
      "upgrade_health_path \"/up\", host: \"x\"" => "upgrade_health_path's one option is headers:, got {:host=>\"x\"}",
      "upgrade_health_path \"/up\", headers: { \"Host\" => \"a\\r\\nX: y\" }" =>
        "upgrade_health_path headers: expects { \"Name\" => \"value\" } Strings without line breaks, " \
        "got {\"Host\"=>\"a\\r\\nX: y\"}",
      "upgrade_health_path \"/up\", headers: { \"Bad Name\" => \"a\" }" =>
        "upgrade_health_path headers: expects { \"Name\" => \"value\" } Strings without line breaks, " \
        "got {\"Bad Name\"=>\"a\"}",
      "upgrade_retire_old \"yes\"" => "upgrade_retire_old expects true or false, got \"yes\""
    }.each do |line, message|
      assert_equal "2: #{message}", config_error("listen ':0'\n#{line}\n"), line
    end
  end

  def test_a_misspelt_directive_is_pointed_at_the_right_one
    assert_match(/unknown directive upgrade_timout \(did you mean upgrade_timeout\?\)/, config_error("upgrade_timout 5\n"))
  end
end
