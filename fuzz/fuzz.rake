# frozen_string_literal: true

require "rbconfig"

# The parser's libFuzzer target and the AddressSanitizer run of its unit
# tests. See fuzz/README.md. Everything built or found goes to tmp/ (ignored
# by git); fuzz/corpus holds only the small committed seed set.
module NarwhalFuzz
  ROOT = File.expand_path("..", __dir__)
  DIR = File.join(ROOT, "fuzz")
  OUT = File.join(ROOT, "tmp", "fuzz")
  BIN = File.join(OUT, "fuzz_parser")
  SOURCES = [File.join(DIR, "fuzz_parser.c"), File.join(ROOT, "ext", "narwhal_http", "parser.c")].freeze
  # undefined: UBSan's default set; the last two are not undefined behaviour
  # in C but are bugs in a parser (a size that wraps, a length truncated)
  SANITIZERS = "fuzzer,address,undefined,unsigned-integer-overflow,implicit-conversion"
  ASAN_DIR = File.join(ROOT, "tmp", "asan")

  module_function

  def clang
    clang = ENV.fetch("CLANG", "clang")
    return clang if system("command -v #{clang} >/dev/null 2>&1")

    abort "fuzz: `#{clang}` not found. libFuzzer needs clang: apt-get install -y clang " \
          "(or set CLANG=/path/to/clang)"
  end
end

namespace :fuzz do
  desc "Build the libFuzzer target tmp/fuzz/fuzz_parser (needs clang)"
  task :build do
    cc = NarwhalFuzz.clang
    mkdir_p NarwhalFuzz::OUT
    sh cc, "-g", "-O1", "-Wall", "-Wextra", "-Werror", "-fno-omit-frame-pointer",
       "-fsanitize=#{NarwhalFuzz::SANITIZERS}", "-fno-sanitize-recover=all",
       "-o", NarwhalFuzz::BIN, *NarwhalFuzz::SOURCES
  end

  desc "Fuzz the parser for SECONDS (default 60): one process, corpus in tmp/fuzz/corpus, crashes in tmp/fuzz/"
  task :run, [:seconds] => :build do |_, args|
    seconds = Integer(args[:seconds] || 60)
    abort "fuzz:run: SECONDS must be positive" unless seconds.positive?
    corpus = File.join(NarwhalFuzz::OUT, "corpus")
    mkdir_p corpus
    # the fuzzer writes what it learns here, so the committed seed dir stays small
    cp Dir[File.join(NarwhalFuzz::DIR, "corpus", "*")], corpus, verbose: false
    sh NarwhalFuzz::BIN,
       "-dict=#{File.join(NarwhalFuzz::DIR, 'http.dict')}",
       "-max_total_time=#{seconds}",
       "-max_len=4096",
       "-timeout=10",
       "-print_final_stats=1",
       "-artifact_prefix=#{NarwhalFuzz::OUT}/",
       corpus
  end
end

desc "Run the parser, scoreboard, poller and sendfile unit tests on an AddressSanitizer build of the extension"
task :asan do
  libasan = begin
    `gcc -print-file-name=libasan.so`.strip
  rescue SystemCallError
    abort "asan: gcc not found"
  end
  abort "asan: gcc's libasan.so not found (apt-get install -y libasan8 or gcc)" unless
    libasan.start_with?("/") && File.exist?(libasan)

  # Built out of tree, into tmp/asan: lib/narwhal_http/narwhal_http.so (the
  # normal build, which other processes may be using) is never replaced, so
  # there is nothing to rebuild afterwards.
  build = File.join(NarwhalFuzz::ASAN_DIR, "build")
  libdir = File.join(NarwhalFuzz::ASAN_DIR, "lib")
  rm_rf NarwhalFuzz::ASAN_DIR
  mkdir_p [build, File.join(libdir, "narwhal_http")]
  Dir.chdir(build) do
    sh({ "NARWHAL_ASAN" => "1" }, RbConfig.ruby, File.join(NarwhalFuzz::ROOT, "ext", "narwhal_http", "extconf.rb"))
    sh "make", "V=1"
  end
  so = File.join(libdir, "narwhal_http", "narwhal_http.so")
  cp File.join(build, "narwhal_http.so"), so
  abort "asan: #{so} was not built with AddressSanitizer" unless `nm -D #{so}`.include?("__asan_")

  # The ASan build is required first, from tmp/asan/lib, so that lib/'s
  # normal build (put first on the load path by test_helper) is never loaded.
  runner = <<~RUBY
    require "narwhal_http/narwhal_http"
    loaded = $LOADED_FEATURES.grep(%r{narwhal_http/narwhal_http\\.so\\z})
    abort "asan: wrong extension loaded: \#{loaded.inspect}" unless loaded == [#{so.inspect}]
    require File.expand_path("test/unit/http_parser_test.rb")
    require File.expand_path("test/unit/scoreboard_test.rb")
    Minitest.after_run do
      loaded = $LOADED_FEATURES.grep(%r{narwhal_http/narwhal_http\\.so\\z})
      abort "asan: a second copy of the extension was loaded: \#{loaded.inspect}" unless loaded.size == 1
      $stderr.puts "asan: tests ran on the AddressSanitizer build \#{loaded.first}"
    end
  RUBY
  env = { "LD_PRELOAD" => libasan, "ASAN_OPTIONS" => "detect_leaks=0:abort_on_error=1:halt_on_error=1" }
  Dir.chdir(NarwhalFuzz::ROOT) do
    sh env, RbConfig.ruby, "-I#{libdir}", "-Ilib", "-Itest", "-e", runner
  end
end
