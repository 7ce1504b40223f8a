# frozen_string_literal: true

require "test_helper"

# lib/narwhal.rb: the top-level autoloads, and the layout's rule that paths
# mirror constants (lib/narwhal/master/control/metrics.rb defines
# Narwhal::Master::Control::Metrics), which each stage's autoloads follow.
class NarwhalTest < Minitest::Test
  LIB = File.expand_path("../../lib/narwhal", __dir__)
  ACRONYMS = { "cli" => "CLI", "dsl" => "DSL" }.freeze
  # Files whose constants are not named by their path.
  OTHER_NAMES = {
    "errors" => %w[ConfigError ClientGone WriteTimeout RequestTimeout ForkError],
    "version" => %w[VERSION]
  }.freeze
  # Defined by the C extension first, reopened in Ruby.
  FROM_C = %w[Scoreboard].freeze

  def constant_name(path)
    path.split("/").map { |part| ACRONYMS.fetch(part) { part.split("_").map(&:capitalize).join } }.join("::")
  end

  def test_every_file_defines_the_constant_its_path_names
    wrong = Dir.glob("**/*.rb", base: LIB).sort.filter_map do |file|
      path = file.delete_suffix(".rb")
      names = OTHER_NAMES.fetch(path) { [constant_name(path)] }
      names.filter_map do |name|
        next if FROM_C.include?(name)

        Narwhal.const_get(name) # through the autoloads alone
        where, = Object.const_source_location("Narwhal::#{name}")
        # required by path before its autoload ran (rackup's handler does):
        # Ruby 3.1 then keeps no location, the loaded file says it
        where = File.join(LIB, file) if !where.is_a?(String) && $LOADED_FEATURES.include?(File.join(LIB, file))
        "#{name} is in #{where}, not #{file}" unless where == File.join(LIB, file)
      rescue NameError => e
        "#{file}: #{e.message}"
      end
    end.flatten
    assert_empty wrong
  end

  def test_the_names_apps_and_hooks_see_stay_at_the_top
    assert_operator Narwhal::ClientGone, :<, IOError
    assert_operator Narwhal::WriteTimeout, :<, Narwhal::ClientGone
    assert_operator Narwhal::RequestTimeout, :<, Exception
    assert_kind_of Class, Narwhal::Worker
    assert_operator Narwhal::HttpParserError, :<, StandardError
  end

  # What USR2 re-executes: the command line and the directory it started
  # in (other tests point :cwd elsewhere for their re-execs).
  def test_start_ctx_keeps_what_a_re_exec_needs
    assert_equal [0, :argv, :cwd], Narwhal::START_CTX.keys.sort_by(&:to_s)
    assert_kind_of Array, Narwhal::START_CTX[:argv]
    assert_kind_of String, Narwhal::START_CTX[0]
    assert_kind_of String, Narwhal::START_CTX[:cwd]
  end
end
