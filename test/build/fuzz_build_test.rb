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
  RESPONSE_FUZZER = File.join(ROOT, "tmp", "fuzz", "fuzz_response")
  RESPONSE_SEEDS = File.join(ROOT, "fuzz", "corpus_response")
  NO_LEAK_CHECKS = { "ASAN_OPTIONS" => "detect_leaks=0" }.freeze
  RUBY_FLAGS = ["-isystem", RbConfig::CONFIG["rubyhdrdir"], "-isystem", RbConfig::CONFIG["rubyarchhdrdir"],
                "-I", File.join(ROOT, "ext", "narwhal_http"), "-L", RbConfig::CONFIG["libdir"],
                *RbConfig::CONFIG["LIBRUBYARG_SHARED"].split].freeze
  # response.c refuses a header value with a control byte in it (a CR LF
  # in it would start a header line of the app's choosing, or the body)
  VALUE_CHECK = <<~'C'.strip
    rb_raise(eResponseError, "response header %+"PRIsVALUE" has a control character in its value", name);
  C
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

  def test_fuzz_response_builds_and_fuzzes_for_the_time_asked
    out, status = run_rake({}, "fuzz:response[3]")

    assert status.success?, out
    runs = out[/^fuzz_response: no crash: (\d+) runs in \d+ s/, 1]
    assert runs, "no summary line in:\n#{out}"
    assert_operator Integer(runs), :>, 0
  end

  # The target runs Ruby, which takes signals over when it starts.
  # libFuzzer's -timeout alarm (each second with -timeout=1) must still
  # reach libFuzzer, not become an exception in the middle of an input.
  def test_fuzz_response_runs_through_libfuzzers_alarm
    corpus = File.join(@dir, "corpus")
    FileUtils.cp_r(RESPONSE_SEEDS, corpus)
    _, status = run_rake({}, "fuzz:build")
    assert status.success?, "rake fuzz:build failed"

    out, status = run_command(NO_LEAK_CHECKS, RESPONSE_FUZZER, "-timeout=1", "-max_total_time=4", "-detect_leaks=0",
                              corpus)

    assert status.success?, out
    assert_match(/^Done \d+ runs in [4-9] second/, out)
  end

  # The oracle reads what was written as a client would: with the check on
  # header values gone, the seed whose value holds a CR LF is caught.
  def test_fuzz_response_aborts_on_a_header_value_that_splits_the_response
    source = File.read(File.join(ROOT, "ext", "narwhal_http", "response.c"))
    assert_includes source, VALUE_CHECK
    # the target's other sources as the fuzz task builds it (parser.c: the
    # token table the head writer shares; the load report's line and the
    # scoreboard it reads)
    load_fuzz_tasks
    others = NarwhalFuzz::TARGETS.fetch("fuzz_response").sources.reject { |f| File.basename(f) == "response.c" }
    bin = build_variant("fuzz_response", source.sub(VALUE_CHECK, ";"), *others, flags: RUBY_FLAGS)
    seed = File.join(RESPONSE_SEEDS, "bad_value")

    out, status = run_command(NO_LEAK_CHECKS, bin, seed)

    refute status.success?, out
    assert_includes out, "fuzz_response: a bare CR"
    assert_includes out, "x-bad: x-injected: 1"
  end

  # A failure report quotes the input, as bytes that need not be UTF-8:
  # the report and the reproducer's name come out whole.
  def test_a_failure_report_quoting_bytes_that_are_not_utf8_names_the_reproducer
    load_fuzz_tasks
    log = File.join(@dir, "fuzz.log")
    File.binwrite(log, "#1\tNEW cov: 1\nfuzz_response: a bare CR\nheaders: {\"x\"=>\"\xB7\xB7 chunked\"}\n" \
                       "Test unit written to /tmp/fuzz_response-crash-1\n".b)
    system("exit 1")
    failed = $?
    stderr = StringIO.new
    error = with_stderr(stderr) do
      assert_raises(SystemExit) { NarwhalFuzz.report("fuzz_response", failed, log) }
    end

    assert_includes error.message, "fuzz_response: FAILED: reproducer /tmp/fuzz_response-crash-1"
    assert_includes stderr.string.b, "\xB7\xB7 chunked".b
    refute_includes stderr.string, "NEW cov", "libFuzzer's progress lines are left out"
  end

  private

  def load_fuzz_tasks
    require "rake"
    load File.join(ROOT, "fuzz", "fuzz.rake") unless defined?(NarwhalFuzz)
  end

  def with_stderr(io)
    before = $stderr
    $stderr = io
    yield
  ensure
    $stderr = before
  end


  # fuzz_reads built on the given parser source instead of parser.c.
  def build_on_parser(source)
    build_variant("fuzz_reads", source, File.join(ROOT, "fuzz", "replay.c"))
  end

  # fuzz/<target>.c built with source in place of the code it fuzzes.
  def build_variant(target, source, *others, flags: [])
    variant = File.join(@dir, "#{target}_variant.c")
    File.write(variant, source)
    bin = File.join(@dir, "#{target}_variant")
    out, status = run_command("clang", "-g", "-O1", "-fsanitize=fuzzer,address", "-o", bin,
                              File.join(ROOT, "fuzz", "#{target}.c"), *others, variant, *flags)
    assert status.success?, out
    bin
  end

  def run_command(*cmd)
    log = File.join(@dir, "command.log")
    pid = Process.spawn(*cmd, out: log, err: log, pgroup: true)
    status = wait_until(timeout: 120, message: cmd.grep(String).first) { Process.waitpid2(pid, Process::WNOHANG)&.last }
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
