# frozen_string_literal: true

# The parser's fuzz target and the AddressSanitizer run of its tests.
# See fuzz/README.md.
namespace :fuzz do
  FUZZ_DIR = File.expand_path(__dir__)
  FUZZ_OUT = File.expand_path("../tmp/fuzz", __dir__)
  FUZZ_BIN = File.join(FUZZ_OUT, "fuzz_parser")
  FUZZ_SOURCES = [File.join(FUZZ_DIR, "fuzz_parser.c"),
                  File.expand_path("../ext/narwhal_http/parser.c", __dir__)].freeze

  def clang!
    return if system("command -v clang >/dev/null 2>&1")

    abort "clang is required for fuzzing: apt-get install -y clang"
  end

  desc "Build the libFuzzer target (tmp/fuzz/fuzz_parser)"
  task :build do
    clang!
    mkdir_p FUZZ_OUT
    sh "clang", "-g", "-O1", "-Wall", "-Wextra", "-fsanitize=fuzzer,address,undefined",
       "-fno-sanitize-recover=undefined", "-o", FUZZ_BIN, *FUZZ_SOURCES
  end

  desc "Fuzz the parser for SECONDS (default 60); crashes go to tmp/fuzz/"
  task :run, [:seconds] => :build do |_, args|
    seconds = Integer(args[:seconds] || 60)
    corpus = File.join(FUZZ_OUT, "corpus")
    mkdir_p corpus
    # the committed seeds stay small; what the fuzzer learns stays in tmp/
    cp Dir[File.join(FUZZ_DIR, "corpus", "*")], corpus
    sh FUZZ_BIN, "-dict=#{File.join(FUZZ_DIR, 'http.dict')}", "-max_total_time=#{seconds}",
       "-print_final_stats=1", "-artifact_prefix=#{FUZZ_OUT}/", corpus
  end
end

desc "Build the extension with AddressSanitizer, run the parser tests, rebuild normally"
task :asan do
  libasan = `gcc -print-file-name=libasan.so`.strip
  abort "libasan not found (gcc's AddressSanitizer runtime)" unless File.exist?(libasan)

  rm_rf "tmp/#{RUBY_PLATFORM}"
  begin
    sh({ "NARWHAL_ASAN" => "1" }, "rake", "compile")
    so = Dir["lib/narwhal_http/narwhal_http.{so,bundle}"].first
    abort "the extension was not built with AddressSanitizer" unless `nm -D #{so}`.include?("__asan_")
    sh({ "LD_PRELOAD" => libasan, "ASAN_OPTIONS" => "detect_leaks=0:abort_on_error=1" },
       "ruby", "-Ilib", "-Itest", "-e", 'ARGV.each { |f| require File.expand_path(f) }',
       *Dir["test/unit/http_parser_test.rb", "test/unit/scoreboard_test.rb"])
  ensure
    rm_rf "tmp/#{RUBY_PLATFORM}"
    sh "rake", "compile"
  end
end
