# frozen_string_literal: true

require "test_helper"

# The version: a version RubyGems takes, the one the gem is built with, and
# the one `narwhal -v` prints.
class VersionTest < Minitest::Test
  ROOT = File.expand_path("../..", __dir__)

  def test_a_gem_version_that_the_gemspec_builds_with
    assert Gem::Version.correct?(Narwhal::VERSION), Narwhal::VERSION
    assert_match(/\A\d+\.\d+\.\d+(\.[0-9A-Za-z]+)*\z/, Narwhal::VERSION)
    spec = Gem::Specification.load(File.join(ROOT, "narwhal.gemspec"))
    assert_equal Gem::Version.new(Narwhal::VERSION), spec.version
    assert Narwhal::VERSION.frozen?
  end

  def test_narwhal_v_prints_it
    out, = capture_io { assert_raises(SystemExit) { Narwhal::CLI.new(["-v"]).run } }
    assert_equal "narwhal #{Narwhal::VERSION}\n", out
  end
end
