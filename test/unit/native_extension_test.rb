# frozen_string_literal: true

require "test_helper"
require "open3"
require "rbconfig"

# Loading the C extension from a source tree that has none: built once,
# with a line saying so, when it can be; otherwise a LoadError that says
# why and what to run. Each case runs in a fresh Ruby whose load path has
# only the tree's lib/ (this process has the extension loaded already);
# the tree's extension is a tiny one of the same name, so that a build
# takes a second. The real one is test/integration/native_extension_test.rb's.
class NarwhalNativeExtensionTest < Minitest::Test
  LIB = File.expand_path("../../lib", __dir__)
  SOURCE = <<~C
    #include <ruby.h>
    void Init_narwhal_http(void) { rb_define_const(rb_cObject, "NARWHAL_TEST_EXTENSION", INT2FIX(42)); }
  C
  EXTCONF = %(require "mkmf"\ncreate_makefile("narwhal_http")\n)

  def setup
    @root = Dir.mktmpdir("narwhal-tree")
    @ext = File.join(@root, "ext/narwhal_http")
    FileUtils.mkdir_p(@ext)
    FileUtils.mkdir_p(File.join(@root, "lib"))
    @target = File.join(@root, "lib/narwhal_http/narwhal_http.#{RbConfig::CONFIG['DLEXT']}")
  end

  def teardown
    FileUtils.rm_rf(@root)
  end

  def sources(extconf: EXTCONF)
    File.write(File.join(@ext, "narwhal_http.c"), SOURCE)
    File.write(File.join(@ext, "extconf.rb"), extconf)
  end

  # [stdout, stderr, success] of requiring the extension from the tree; a
  # LoadError's message is printed as it is.
  def load_extension(env = {})
    script = "require #{File.join(LIB, 'narwhal/native_extension').inspect}\n" \
             "begin\n  Narwhal::NativeExtension.new(root: #{@root.inspect}).require_extension\n" \
             "rescue LoadError => e\n  warn e.message\n  exit 1\nend\nputs NARWHAL_TEST_EXTENSION"
    env = ENV.to_h.reject { |k, _| k.start_with?("RUBY", "BUNDLE", "GEM_") }.merge(env)
    out, err, status = Open3.capture3(env, RbConfig.ruby, "-I", File.join(@root, "lib"), "-e", script,
                                      unsetenv_others: true, stdin_data: "")
    [out, err, status.success?]
  end

  def test_built_on_first_require_once_and_loaded
    sources
    out, err, ok = load_extension
    assert ok, err
    assert_equal "42\n", out
    assert_match(/\Anarwhal: building the C extension #{Regexp.escape(@target)} \(first use of this source tree/, err)
    assert File.exist?(@target)
    refute Dir.glob("#{File.dirname(@target)}/*.tmp").any?, "renamed into place whole"
    out, err, ok = load_extension
    assert_equal ["42\n", "", true], [out, err, ok], "built already: loaded, not built again"
  end

  def test_a_failing_build_shows_its_output_and_what_to_run
    sources(extconf: %(warn "extconf says no: missing header foo.h"\nexit 1\n))
    out, err, ok = load_extension
    refute ok
    assert_empty out
    message = err.lines.drop(1).join # after the line saying it builds
    assert message.start_with?("narwhal's C extension is not built in #{@root} (Bundler does not build the " \
                               "extensions of gems given with `path:`), and building it failed:\n" \
                               "extconf says no: missing header foo.h\n"), message
    assert_includes message, "cd #{@root} && bundle install && bundle exec rake compile"
    refute File.exist?(@target)
  end

  def test_without_sources_or_a_compiler_it_says_why_it_cannot_build
    _, err, ok = load_extension
    refute ok
    assert_includes err, "it cannot be built now: its sources (#{@ext}) are missing"
    sources
    compiler = RbConfig::CONFIG["CC"].split.first
    _, err, ok = load_extension("PATH" => File.join(@root, "empty-path"))
    refute ok
    assert_includes err, "it cannot be built now: no C compiler (#{compiler}) in PATH"
    assert_includes err, "or install the gem (gem install narwhal), which builds it at install time."
  end
end
