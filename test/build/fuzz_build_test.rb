# frozen_string_literal: true

require "test_helper"
require "rbconfig"

# The fuzz targets as rake builds and runs them (fuzz/fuzz.rake).
#
# `rake fuzz:build` on a machine with clang but without libFuzzer's runtime
# (Debian's libclang-rt-*-dev): it must say what to install, not leave the
# reader with a linker error. The missing runtime is made real by running
# clang with a resource directory that has clang's headers and no runtime
# libraries, which is what a clang without the package sees.
#
# fuzz_reads is built, fuzzes, and catches a parser whose verdict depends
# on how the bytes were read.
class FuzzBuildTest < Minitest::Test
  ROOT = File.expand_path("../..", __dir__)
  FUZZER = File.join(ROOT, "tmp", "fuzz", "fuzz_parser")
  READS_FUZZER = File.join(ROOT, "tmp", "fuzz", "fuzz_reads")
  # One request; the read plan before it (fuzz/fuzz_reads.c) reads it in
  # pieces of 5 bytes, so that its lines arrive split across reads.
  REQUEST = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
  READS_OF_FIVE = "\x01\x05".b + REQUEST
  # parser.c, except that a line whose bytes came in more than one read is
  # refused: the bug a parser that is not resumable has.
  SPLIT_LINES_REFUSED = <<~C
    #define nw_parse_head parse_head_as_is
    #include "#{ROOT}/ext/narwhal_http/parser.c"
    #undef nw_parse_head
    size_t nw_parse_head(nw_parser *p, const char *buf, size_t len, size_t off);
    size_t nw_parse_head(nw_parser *p, const char *buf, size_t len, size_t off)
    {
      if (p->scanned > 0) {
        p->state = NW_S_ERROR;
        p->error = 400;
        return NW_PARSE_ERROR;
      }
      return parse_head_as_is(p, buf, len, off);
    }
  C

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

  def test_fuzz_reads_builds_and_fuzzes_for_the_time_asked
    out, status = run_rake({}, "fuzz:reads[3]")

    assert status.success?, out
    runs = out[/^fuzz_reads: no crash: (\d+) runs in \d+ s/, 1]
    assert runs, "no summary line in:\n#{out}"
    assert_operator Integer(runs), :>, 0
    assert File.executable?(READS_FUZZER), "#{READS_FUZZER} was not built"
    refute_empty Dir[File.join(ROOT, "tmp", "fuzz", "corpus_reads", "plan*-pipelined_mixed")],
                 "the seeds were not put behind read plans"
  end

  # The target is an oracle, not only a crash detector: built on a parser
  # that cannot resume a line split across reads, it aborts on an input the
  # real parser passes, and prints both records.
  def test_fuzz_reads_aborts_when_the_parser_depends_on_the_reads
    input = File.join(@dir, "reads-of-five")
    File.binwrite(input, READS_OF_FIVE)
    _, status = run_rake({}, "fuzz:build")
    assert status.success?, "rake fuzz:build failed"

    out, status = run_command(READS_FUZZER, input)
    assert status.success?, out

    out, status = run_command(build_on_parser(SPLIT_LINES_REFUSED), input)
    refute status.success?, out
    assert_includes out, "fuzz_reads: the parser disagrees with itself (planned reads, connection's buffer vs whole)"
    assert_includes out, "read plan (1): 5"
    assert_includes out, "---- whole: status=0 requests=1"
    assert_includes out, "---- planned reads, connection's buffer: status=400 requests=0"
  end

  private


  # fuzz_reads built on the given parser source instead of parser.c.
  def build_on_parser(source)
    parser = File.join(@dir, "parser_variant.c")
    File.write(parser, source)
    bin = File.join(@dir, "fuzz_reads_variant")
    out, status = run_command("clang", "-g", "-O1", "-fsanitize=fuzzer,address", "-o", bin,
                              File.join(ROOT, "fuzz", "fuzz_reads.c"), File.join(ROOT, "fuzz", "replay.c"), parser)
    assert status.success?, out
    bin
  end

  def run_command(*cmd)
    log = File.join(@dir, "command.log")
    pid = Process.spawn(*cmd, out: log, err: log, pgroup: true)
    status = wait_until(timeout: 120, message: cmd.first) { Process.waitpid2(pid, Process::WNOHANG)&.last }
    [File.read(log), status]
  ensure
    Process.kill(:KILL, -pid) if pid && status.nil?
    Process.wait(pid) if pid && status.nil?
  end

  # Runs rake in the repo, with this process's bundle, within a deadline.
  def run_rake(env, *tasks)
    log = File.join(@dir, "rake.log")
    pid = Process.spawn(env, RbConfig.ruby, "-S", "rake", *tasks, chdir: ROOT, out: log, err: log, pgroup: true)
    status = wait_until(timeout: 300, message: "rake #{tasks.join(' ')}") do
      Process.waitpid2(pid, Process::WNOHANG)&.last
    end
    [File.read(log), status]
  ensure
    Process.kill(:KILL, -pid) if pid && status.nil?
    Process.wait(pid) if pid && status.nil?
  end
end
