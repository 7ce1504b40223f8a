# frozen_string_literal: true

require "test_helper"
require "open3"
require_relative "../support/command_process"

# A source tree used as a path gem has no compiled extension (Bundler does
# not build path gems' extensions): the first require builds it, once,
# logging that it does; where it cannot, the error says what to run.
class NativeExtensionTest < Minitest::Test
  ROOT = Narwhal::ServerProcess::ROOT
  BUILD_LINE = /^narwhal: building the C extension (\S+) \(first use of this source tree/
  REQUIRE = 'require "narwhal"; puts Narwhal::HttpParser.name'

  def setup
    @tmp = Dir.mktmpdir("narwhal-ext")
    @tree = File.join(@tmp, "narwhal")
    copy_source_tree(@tree)
  end

  def teardown
    FileUtils.rm_rf(@tmp)
  end

  # The files the gem ships (no compiled library among them).
  def copy_source_tree(dest)
    files = Dir.chdir(ROOT) { Gem::Specification.load("narwhal.gemspec").files } + ["narwhal.gemspec"]
    files.each do |file|
      FileUtils.mkdir_p(File.dirname(File.join(dest, file)))
      FileUtils.cp(File.join(ROOT, file), File.join(dest, file))
    end
    refute Dir.glob("#{dest}/**/*.so").any?
  end

  # argv run with env added to this process's environment before bundler
  # set it up: only the copy's lib/ is on the load path.
  def run_ruby(env, *argv)
    env = Narwhal::CommandProcess.unbundled_env.reject { |k, _| k == "RUBYLIB" }.merge(env)
    Open3.capture3(env, *argv, chdir: @tmp, stdin_data: "", unsetenv_others: true)
  end

  def test_a_path_gem_builds_its_extension_on_first_require_once
    File.write(File.join(@tmp, "Gemfile"), %(source "https://rubygems.org"\ngem "narwhal", path: "#{@tree}"\n))
    env = { "BUNDLE_GEMFILE" => File.join(@tmp, "Gemfile") }
    bundle = Gem.bin_path("bundler", "bundle")
    _, err, status = run_ruby(env, RbConfig.ruby, bundle, "lock", "--local")
    assert status.success?, err

    # two processes at once: one builds, the other waits for it
    command = [RbConfig.ruby, bundle, "exec", "ruby", "-e", REQUIRE]
    results = Array.new(2) { Thread.new { run_ruby(env, *command) } }.map(&:value)
    results.each { |out, err, status| assert status.success?, "#{out}#{err}" }
    assert_equal ["Narwhal::HttpParser\n"] * 2, results.map(&:first)
    logs = results.map { |_, err, _| err }.join
    assert_equal ["#{@tree}/lib/narwhal_http/narwhal_http.so"], logs.scan(BUILD_LINE).flatten, logs
    assert File.file?("#{@tree}/lib/narwhal_http/narwhal_http.so")

    out, err, status = run_ruby(env, *command)
    assert status.success?, err
    assert_equal "Narwhal::HttpParser\n", out
    refute_match BUILD_LINE, err
  end

  # Ruby prints an uncaught error as "where: first line (LoadError)", then the
  # other lines.
  def assert_message(err, reason)
    first, rest = expected_message(reason).split("\n", 2)
    assert_includes err, "#{first} (LoadError)\n#{rest}"
  end

  def expected_message(reason)
    <<~MSG
      narwhal's C extension is not built in #{@tree} (Bundler does not build the extensions of gems given with `path:`), and it cannot be built now: #{reason}
      Build it once, then start again:
        cd #{@tree} && bundle install && bundle exec rake compile
      or, without rake-compiler:
        cd #{@tree}/ext/narwhal_http && ruby extconf.rb && make && mkdir -p #{@tree}/lib/narwhal_http && cp narwhal_http.so #{@tree}/lib/narwhal_http/
      or install the gem (gem install narwhal), which builds it at install time.
    MSG
  end

  def test_without_a_compiler_the_error_says_what_to_run
    empty = File.join(@tmp, "bin")
    Dir.mkdir(empty)
    _, err, status = run_ruby({ "PATH" => empty }, RbConfig.ruby, "-I", "#{@tree}/lib", "-e", REQUIRE)
    refute status.success?
    compiler = RbConfig::CONFIG["CC"].split.first
    assert_message err, "no C compiler (#{compiler}) in PATH"
    refute_match BUILD_LINE, err
    refute File.exist?("#{@tree}/lib/narwhal_http")
  end

  def test_in_a_read_only_tree_the_error_says_what_to_run
    argv = [RbConfig.ruby, "-I", "#{@tree}/lib", "-e", REQUIRE]
    if Process.uid.zero?
      # root writes anywhere: run as nobody, who may read the tree only
      FileUtils.chmod_R("a+rX", @tmp)
      argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", *argv]
    else
      File.chmod(0o555, "#{@tree}/lib")
    end
    _, err, status = run_ruby({}, *argv)
    refute status.success?
    assert_message err, "#{@tree}/lib is not writable"
  ensure
    File.chmod(0o755, "#{@tree}/lib")
  end
end
