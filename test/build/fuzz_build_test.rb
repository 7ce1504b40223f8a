# frozen_string_literal: true

require "test_helper"
require "rbconfig"

# `rake fuzz:build` on a machine with clang but without libFuzzer's runtime
# (Debian's libclang-rt-*-dev): it must say what to install, not leave the
# reader with a linker error. The missing runtime is made real by running
# clang with a resource directory that has clang's headers and no runtime
# libraries, which is what a clang without the package sees.
class FuzzBuildTest < Minitest::Test
  ROOT = File.expand_path("../..", __dir__)
  FUZZER = File.join(ROOT, "tmp", "fuzz", "fuzz_parser")

  def setup
    @dir = Dir.mktmpdir("fuzz-build")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def test_fuzz_build_names_the_package_when_libfuzzer_runtime_is_missing
    real = `clang -print-resource-dir`.strip
    assert $?.success?, "clang is needed (bin/setup installs it)"
    major = `clang -dumpversion`.to_i
    resources = File.join(@dir, "resources")
    FileUtils.mkdir_p(resources)
    File.symlink(File.join(real, "include"), File.join(resources, "include"))
    clang = File.join(@dir, "clang")
    File.write(clang, "#!/bin/sh\nexec clang -resource-dir '#{resources}' \"$@\"\n")
    File.chmod(0o755, clang)
    before = File.exist?(FUZZER) && File.stat(FUZZER).mtime

    out, status = run_rake({ "CLANG" => clang }, "fuzz:build")

    refute status.success?, out
    assert_includes out, "fuzz: libFuzzer's runtime is not installed"
    assert_includes out, "apt-get install -y libclang-rt-#{major}-dev"
    assert_equal before, File.exist?(FUZZER) && File.stat(FUZZER).mtime, "the built fuzzer was replaced or removed"
  end

  private

  # Runs rake in the repo, with this process's bundle, within a deadline.
  def run_rake(env, *tasks)
    log = File.join(@dir, "rake.log")
    pid = Process.spawn(env, RbConfig.ruby, "-S", "rake", *tasks, chdir: ROOT, out: log, err: log, pgroup: true)
    status = wait_until(timeout: 120, message: "rake #{tasks.join(' ')}") do
      Process.waitpid2(pid, Process::WNOHANG)&.last
    end
    [File.read(log), status]
  ensure
    Process.kill(:KILL, -pid) if pid && status.nil?
    Process.wait(pid) if pid && status.nil?
  end
end
