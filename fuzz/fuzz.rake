# frozen_string_literal: true

require "rbconfig"

# The libFuzzer targets (the request parser, the response head) and the
# AddressSanitizer run of the extension's unit tests. See fuzz/README.md.
# Everything built or found goes to tmp/ (ignored by git); fuzz/corpus and
# fuzz/corpus_response hold only the small committed seed sets.
#
# bin/test runs them all, so they are quiet unless they fail: one summary
# line on success, the full output (and the reproducer) on failure.
# VERBOSE=1 shows everything as it happens.
module NarwhalFuzz
  ROOT = File.expand_path("..", __dir__)
  DIR = File.join(ROOT, "fuzz")
  OUT = File.join(ROOT, "tmp", "fuzz")
  EXT = File.join(ROOT, "ext", "narwhal_http")
  # undefined: UBSan's default set; the last two are not undefined behaviour
  # in C but are bugs in a parser (a size that wraps, a length truncated)
  SANITIZERS = "fuzzer,address,undefined,unsigned-integer-overflow,implicit-conversion"

  # One libFuzzer target: tmp/fuzz/<name>, built from fuzz/<name>.c and
  # sources; fuzzed from the seeds in fuzz/<seeds> copied to tmp/fuzz/<corpus>
  # (each behind each of plans, when given), its output in tmp/fuzz/<log>,
  # its reproducers tmp/fuzz/<artifacts>crash-*.
  Target = Struct.new(:name, :sources, :cflags, :libs, :sanitizers, :seeds, :plans, :dict, :corpus, :log,
                      :artifacts, :options, :env, keyword_init: true)

  PARSER_SOURCES = [File.join(DIR, "replay.c"), File.join(EXT, "parser.c")].freeze
  # Plans put before each seed for fuzz_reads (fuzz/fuzz_reads.c), so that
  # its seeds are the same requests: one byte per read; reads of 3, 1, 5 and
  # 2 bytes; reads of 3, 7, 1 and 13 bytes, dropping the consumed bytes
  # before the first and the third.
  READ_PLANS = ["\x00", "\x04\x03\x01\x05\x02", "\x04\x83\x07\x81\x0d"].map(&:b).freeze
  # fuzz_response embeds Ruby. Ruby's headers are not -Wextra clean, and
  # the extension is built with -Wno-unused-parameter (extconf.rb): Ruby's
  # method signatures take arguments a method may not use. Ruby's own inline
  # functions convert sizes implicitly, so only the default UBSan set. Its
  # heap is freed by its GC, which LeakSanitizer cannot follow: no leak
  # checks.
  RUBY_CFLAGS = ["-isystem", RbConfig::CONFIG["rubyhdrdir"], "-isystem", RbConfig::CONFIG["rubyarchhdrdir"],
                 "-Wno-unused-parameter"].freeze
  RUBY_LIBS = ["-L#{RbConfig::CONFIG['libdir']}", *RbConfig::CONFIG["LIBRUBYARG_SHARED"].split].freeze

  TARGETS = [
    Target.new(name: "fuzz_parser", sources: PARSER_SOURCES, seeds: "corpus", dict: "http.dict",
               corpus: "corpus", log: "run.log", artifacts: ""),
    Target.new(name: "fuzz_reads", sources: PARSER_SOURCES, seeds: "corpus", plans: READ_PLANS, dict: "http.dict",
               corpus: "corpus_reads", log: "reads.log", artifacts: "fuzz_reads-"),
    Target.new(name: "fuzz_response", sources: %w[response.c parser.c load_report.c scoreboard.c scoreboard_slots.c]
                                                 .map { |f| File.join(EXT, f) },
               cflags: RUBY_CFLAGS, libs: RUBY_LIBS,
               sanitizers: "fuzzer,address,undefined", seeds: "corpus_response", dict: "response.dict",
               corpus: "corpus_response", log: "response.log", artifacts: "fuzz_response-",
               options: ["-detect_leaks=0"], env: { "ASAN_OPTIONS" => "detect_leaks=0" })
  ].to_h { |target| [target.name, target] }.freeze

  ASAN_DIR = File.join(ROOT, "tmp", "asan")
  # libFuzzer's progress lines ("#4096\tpulse cov: ..."), one per new input
  PROGRESS = /\A(#\d+\t|\tNEW_FUNC)/

  module_function

  def clang
    clang = ENV.fetch("CLANG", "clang")
    return clang if system("command -v #{clang} >/dev/null 2>&1")

    abort "fuzz: `#{clang}` not found. libFuzzer needs clang: apt-get install -y clang " \
          "(or set CLANG=/path/to/clang)"
  end

  # Debian ships libFuzzer's runtime apart from clang: without it the link
  # fails with "cannot find .../libclang_rt.fuzzer-x86_64.a". Said before
  # compiling, in words that say what to install. A clang too old for
  # --print-runtime-dir gets the same words from the link error instead.
  def check_runtime(cc)
    dir = `#{cc} --print-runtime-dir 2>/dev/null`.strip
    return if dir.empty? || Dir.glob(File.join(dir, "libclang_rt.fuzzer*.a")).any?

    abort missing_runtime(cc, "#{dir} has no libclang_rt.fuzzer")
  end

  def missing_runtime(cc, detail)
    major = `#{cc} -dumpversion 2>/dev/null`.to_i
    package = major.positive? ? "libclang-rt-#{major}-dev" : "libclang-rt-<clang's major version>-dev"
    "fuzz: libFuzzer's runtime is not installed (#{detail}).\n" \
      "fuzz: install it with: apt-get install -y #{package}   (bin/setup does)"
  end

  def verbose?
    !ENV["VERBOSE"].to_s.empty?
  end

  # Runs cmd (optionally an env hash first) with its output in log and
  # returns its Process::Status. VERBOSE=1: echoed and streamed instead.
  def run_logged(log, *cmd)
    if verbose?
      $stderr.puts cmd.grep(String).join(" ")
      system(*cmd)
    else
      system(*cmd, out: log, err: %i[child out])
    end
    $?
  end

  def describe(status)
    status.signaled? ? "killed by SIG#{Signal.signame(status.termsig)}" : "exit status #{status.exitstatus}"
  end

  def relative(path)
    path.delete_prefix("#{ROOT}/")
  end

  def binary(name)
    File.join(OUT, name)
  end

  # Builds the target; aborts, saying why, on failure.
  def build(cc, target)
    log = File.join(OUT, "build.log")
    bin = binary(target.name)
    # linked beside the target and renamed: a failed build leaves a fuzzer
    # that another run may be using in place
    part = "#{bin}.#{Process.pid}"
    status = run_logged(log, cc, "-g", "-O1", "-Wall", "-Wextra", *target.cflags, "-Werror", "-fno-omit-frame-pointer",
                        "-fsanitize=#{target.sanitizers || SANITIZERS}", "-fno-sanitize-recover=all",
                        "-o", part, File.join(DIR, "#{target.name}.c"), *target.sources, *target.libs)
    return File.rename(part, bin) if status.success?

    FileUtils.rm_f(part)
    output = verbose? ? "" : File.read(log)
    $stderr.puts output
    missing = output[/cannot find (\S*clang_rt[^\s:]*)/, 1]
    abort missing_runtime(cc, "the link cannot find #{missing}") if missing

    abort "fuzz: building #{relative(bin)} failed (clang's output above)"
  end

  # The fuzzer writes what it learns into corpus, so the committed seed dir
  # stays small.
  def seed(target, corpus)
    FileUtils.mkdir_p(corpus)
    seeds = Dir[File.join(DIR, target.seeds, "*")]
    return FileUtils.cp(seeds, corpus) unless target.plans

    seeds.each do |path|
      target.plans.each_with_index do |plan, i|
        File.binwrite(File.join(corpus, "plan#{i}-#{File.basename(path)}"), plan + File.binread(path))
      end
    end
  end

  # Runs the target for seconds: one process; prints one line, or the
  # report and the reproducer and fails.
  def fuzz(name, seconds)
    target = TARGETS.fetch(name)
    abort "#{name}: SECONDS must be positive" unless seconds.positive?
    corpus = File.join(OUT, target.corpus)
    log = File.join(OUT, target.log)
    seed(target, corpus)
    status = run_logged(log, target.env || {}, binary(name), "-dict=#{File.join(DIR, target.dict)}",
                        "-max_total_time=#{seconds}", "-max_len=4096", "-timeout=10", "-print_final_stats=1",
                        *target.options, "-artifact_prefix=#{File.join(OUT, target.artifacts)}", corpus)
    if verbose?
      return if status.success?

      abort "#{name}: FAILED (#{describe(status)}); the reproducer is named above"
    end
    report(name, status, log)
  end

  # One line on success; else the report and the reproducer, and fails.
  def report(name, status, log)
    # as bytes: a report quotes the input that failed, which need not be UTF-8
    output = File.binread(log)
    return puts run_summary(name, output, log) if status.success?

    report_failure(name, status, output, log)
  end

  # "fuzz_parser: no crash: 812345 runs in 61 s (13317/s), coverage 378, corpus 981 inputs"
  def run_summary(name, output, log)
    runs, secs = output.match(/^Done (\d+) runs in (\d+) second/)&.captures
    return "#{name}: no crash (libFuzzer's output: #{relative(log)})" unless runs

    rate = output[/^stat::average_exec_per_sec:\s+(\d+)/, 1]
    cov, corp = output.match(/^#\d+\tDONE\s+cov: (\d+) ft: \d+ corp: (\d+)/)&.captures
    parts = ["#{runs} runs in #{secs} s#{" (#{rate}/s)" if rate}"]
    parts << "coverage #{cov}, corpus #{corp} inputs" if cov
    "#{name}: no crash: #{parts.join(', ')}"
  end

  # The crash report without the progress lines before it, then each
  # reproducer libFuzzer wrote (crash-*, timeout-*, oom-*, leak-*).
  def report_failure(name, status, output, log)
    $stderr.puts output.lines.grep_v(PROGRESS).join
    found = output.scan(/Test unit written to (\S+)/).flatten
    if found.empty?
      abort "#{name}: FAILED (#{describe(status)}) and wrote no reproducer; libFuzzer's output: #{relative(log)}"
    end

    abort found.map { |path|
      "#{name}: FAILED: reproducer #{path} (its bytes are above, also as Base64)\n" \
        "#{name}: reproduce with: #{relative(binary(name))} #{relative(path)}"
    }.join("\n")
  end
end

namespace :fuzz do
  desc "Build the libFuzzer targets tmp/fuzz/fuzz_{parser,reads,response} (needs clang and libclang-rt-*-dev)"
  task :build do
    cc = NarwhalFuzz.clang
    NarwhalFuzz.check_runtime(cc)
    mkdir_p NarwhalFuzz::OUT, verbose: false
    NarwhalFuzz::TARGETS.each_value { |target| NarwhalFuzz.build(cc, target) }
  end

  desc "Fuzz the parser for SECONDS (default 60): one process, corpus in tmp/fuzz/corpus, crashes in tmp/fuzz/"
  task :run, [:seconds] => :build do |_, args|
    NarwhalFuzz.fuzz("fuzz_parser", Integer(args[:seconds] || 60))
  end

  desc "Fuzz the parser in reads the fuzzer chooses, for SECONDS (default 60): " \
       "corpus in tmp/fuzz/corpus_reads, crashes in tmp/fuzz/fuzz_reads-*"
  task :reads, [:seconds] => :build do |_, args|
    NarwhalFuzz.fuzz("fuzz_reads", Integer(args[:seconds] || 60))
  end

  desc "Fuzz the response head writer for SECONDS (default 60): " \
       "corpus in tmp/fuzz/corpus_response, crashes in tmp/fuzz/fuzz_response-*"
  task :response, [:seconds] => :build do |_, args|
    NarwhalFuzz.fuzz("fuzz_response", Integer(args[:seconds] || 60))
  end
end

module NarwhalFuzz
  module_function

  # Builds the extension with AddressSanitizer out of tree, into tmp/asan:
  # lib/narwhal_http/narwhal_http.so (the normal build, which other
  # processes may be using) is never replaced, so there is nothing to
  # rebuild afterwards. Returns the environment that preloads libasan and
  # the directory to put first on the load path.
  def asan_build(task)
    libasan = begin
      `gcc -print-file-name=libasan.so`.strip
    rescue SystemCallError
      abort "#{task}: gcc not found"
    end
    abort "#{task}: gcc's libasan.so not found (apt-get install -y libasan8 or gcc)" unless
      libasan.start_with?("/") && File.exist?(libasan)

    build = File.join(ASAN_DIR, "build")
    libdir = File.join(ASAN_DIR, "lib")
    so = File.join(libdir, "narwhal_http", "narwhal_http.so")
    env = { "LD_PRELOAD" => libasan,
            "ASAN_OPTIONS" => "detect_leaks=0:abort_on_error=1:halt_on_error=1:use_sigaltstack=0" }
    # one build serves rake asan and rake fuzz:loop, until a source changes
    return [env, libdir, so] if asan_build_current?(so)

    FileUtils.rm_rf ASAN_DIR
    FileUtils.mkdir_p [build, File.join(libdir, "narwhal_http")]
    built = Dir.chdir(build) do
      run_logged(File.join(ASAN_DIR, "build.log"), { "NARWHAL_ASAN" => "1" }, RbConfig.ruby,
                 File.join(ROOT, "ext", "narwhal_http", "extconf.rb")).success? &&
        run_logged(File.join(ASAN_DIR, "make.log"), "make", "V=1").success?
    end
    unless built
      Dir[File.join(ASAN_DIR, "*.log")].sort.each { |log| $stderr.puts File.read(log) }
      abort "#{task}: building the extension with AddressSanitizer failed (output above)"
    end
    FileUtils.cp File.join(build, "narwhal_http.so"), so
    abort "#{task}: #{so} was not built with AddressSanitizer" unless `nm -D #{so}`.include?("__asan_")

    # use_sigaltstack=0 (env above): Ruby gives each thread a signal stack
    # of its own, from malloc; ASan, told to make its own, tries to unmap
    # Ruby's when a thread ends and aborts ("unable to unmap", in about half
    # the runs)
    [env, libdir, so]
  end

  # The ASan build exists and is newer than every source it is built from.
  def asan_build_current?(so)
    return false unless File.exist?(so)

    sources = Dir[File.join(EXT, "*.{c,h,rb}")]
    sources.all? { |source| File.mtime(source) < File.mtime(so) }
  end

  # Runs the named unit tests (test/unit/<name>_test.rb, minitest options
  # after them) on the ASan build, which is required first, from
  # tmp/asan/lib, so that lib/'s normal build (put first on the load path by
  # test_helper) is never loaded. Quiet unless it fails; log: its output.
  def asan_tests(task, names, env: {}, options: [], log: File.join(ASAN_DIR, "test.log"))
    asan_env, libdir, so = asan_build(task)
    runner = <<~RUBY
      require "narwhal_http/narwhal_http"
      loaded = $LOADED_FEATURES.grep(%r{narwhal_http/narwhal_http\\.so\\z})
      abort "#{task}: wrong extension loaded: \#{loaded.inspect}" unless loaded == [#{so.inspect}]
      #{names.inspect}.each { |name| require File.expand_path("test/unit/\#{name}_test.rb") }
      Minitest.after_run do
        loaded = $LOADED_FEATURES.grep(%r{narwhal_http/narwhal_http\\.so\\z})
        abort "#{task}: a second copy of the extension was loaded: \#{loaded.inspect}" unless loaded.size == 1
        $stderr.puts "#{task}: tests ran on the AddressSanitizer build \#{loaded.first}"
      end
    RUBY
    status = Dir.chdir(ROOT) do
      run_logged(log, asan_env.merge(env), RbConfig.ruby, "-I#{libdir}", "-Ilib", "-Itest", "-e", runner, "--",
                 *options)
    end
    if verbose?
      return if status.success?

      abort "#{task}: FAILED (#{describe(status)})"
    end
    output = File.read(log)
    unless status.success?
      $stderr.puts output
      abort "#{task}: FAILED (#{describe(status)}): the AddressSanitizer report or the failing tests are above"
    end
    # "asan: 201 runs, 3067 assertions, 0 failures, 0 errors, 0 skips on tmp/asan/lib/..."
    totals = output[/^\d+ runs, .*skips$/] || "tests passed"
    extra = output[/^request loop: .*$/]
    puts "#{task}: #{[extra, totals].compact.join('; ')} on the AddressSanitizer build #{relative(so)}"
  end
end

desc "Run the unit tests of the extension's parts (parser, response head and writer, request loop and its " \
     "accept, arrival stamps, peer address, scoreboard and load report, poller, sendfile, free space, access " \
     "log lines, the backtrace signal and the answers at timeout) on an AddressSanitizer build"
task :asan do
  NarwhalFuzz.asan_tests("asan", %w[http_parser response_head request_loop connection/factory listener listener/bind
                                    scoreboard poller sendfile socket_writer/spool_budget access_log
                                    access_log/buffer access_log/combined access_log/format access_log/json
                                    response_writer response_writer/output_stream connection/loop_results load_report
                                    dispatcher/shedding arrival responder/queue_time backtrace_signal stranded
                                    master/worker_monitor/stranded_requests master/worker_monitor/timeout])
end

namespace :fuzz do
  desc "Replay random request streams in random reads through the C request loop and through the Ruby path, " \
       "for SECONDS (default 60), on an AddressSanitizer build: both must answer alike"
  task :loop, [:seconds] do |_, args|
    seconds = Integer(args[:seconds] || 60)
    NarwhalFuzz.asan_tests("fuzz:loop", %w[request_loop], env: { "NARWHAL_LOOP_FUZZ_SECONDS" => seconds.to_s },
                                                          options: ["-n", "/every_stream/"],
                                                          log: File.join(NarwhalFuzz::ASAN_DIR, "loop.log"))
  end
end
