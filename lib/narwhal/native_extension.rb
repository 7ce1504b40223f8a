# frozen_string_literal: true

require "rbconfig"
require "fileutils"
require "tmpdir"

module Narwhal
  # Loads the C extension (narwhal_http). A source tree used as a path gem
  # (`gem "narwhal", path: "..."`) has none: Bundler does not build the
  # extensions of path gems. There it is built on first require, as
  # `rake compile` would (extconf.rb and make, into lib/narwhal_http/), when
  # the tree is writable and a compiler is at hand; otherwise the LoadError
  # says what to run. A lock file keeps two processes from building at once.
  class NativeExtension
    FEATURE = "narwhal_http/narwhal_http"
    ROOT = File.expand_path("../..", __dir__)

    def initialize(root: ROOT, log: $stderr)
      @root = root
      @log = log
      @ext_dir = File.join(root, "ext", "narwhal_http")
      @lib_dir = File.join(root, "lib", "narwhal_http")
      @target = File.join(@lib_dir, "narwhal_http.#{RbConfig::CONFIG['DLEXT']}")
    end

    def require_extension
      require FEATURE
    rescue LoadError => e
      # a library that is there but does not load: its own error says more
      raise unless e.path == FEATURE && !File.exist?(@target)

      build
      require FEATURE
    end

    private

    def build
      problem = unbuildable_because
      raise LoadError, instructions("it cannot be built now: #{problem}"), cause: nil if problem

      FileUtils.mkdir_p(@lib_dir)
      File.open(File.join(@lib_dir, "build.lock"), File::RDWR | File::CREAT, 0o644) do |lock|
        lock.flock(File::LOCK_EX)
        # whoever held the lock before us may have built it
        compile unless File.exist?(@target)
      end
    end

    def unbuildable_because
      return "its sources (#{@ext_dir}) are missing" unless File.exist?(File.join(@ext_dir, "extconf.rb"))

      dir = File.exist?(@lib_dir) ? @lib_dir : File.dirname(@lib_dir)
      return "#{dir} is not writable" unless File.writable?(dir)

      compiler = RbConfig::CONFIG["CC"].to_s.split.first
      return "no C compiler (#{compiler}) in PATH" unless compiler && executable?(compiler)
      return "no make in PATH" unless executable?(make)

      headers = RbConfig::CONFIG["rubyhdrdir"]
      "Ruby's C headers are missing (#{headers}; Debian: apt-get install ruby-dev)" unless
        File.exist?(File.join(headers.to_s, "ruby.h"))
    end

    def compile
      @log.puts("narwhal: building the C extension #{@target} (first use of this source tree: " \
                "ruby ext/narwhal_http/extconf.rb && make)")
      Dir.mktmpdir("narwhal-build") do |dir|
        log = File.join(dir, "build.log")
        ok = run([RbConfig.ruby, File.join(@ext_dir, "extconf.rb")], dir, log) && run([make], dir, log)
        unless ok
          output = File.read(log)
          raise LoadError, instructions("building it failed:\n#{output[-3000..] || output}"), cause: nil
        end

        # rename: a process that finds the file finds all of it
        partial = "#{@target}.#{Process.pid}.tmp"
        FileUtils.cp(File.join(dir, File.basename(@target)), partial)
        File.rename(partial, @target)
      end
    end

    def run(command, dir, log)
      pid = Process.spawn(*command, chdir: dir, out: [log, "a"], err: [:child, :out], in: File::NULL)
      Process.wait2(pid).last.success?
    end

    def make
      ENV.fetch("MAKE", "make")
    end

    def executable?(name)
      return File.executable?(name) if name.include?("/")

      ENV.fetch("PATH", "").split(File::PATH_SEPARATOR).any? do |dir|
        path = File.join(dir, name)
        File.file?(path) && File.executable?(path)
      end
    end

    def instructions(reason)
      <<~MSG.chomp
        narwhal's C extension is not built in #{@root} (Bundler does not build the extensions of gems given with `path:`), and #{reason}
        Build it once, then start again:
          cd #{@root} && bundle install && bundle exec rake compile
        or, without rake-compiler:
          cd #{@ext_dir} && ruby extconf.rb && make && mkdir -p #{@lib_dir} && cp narwhal_http.#{RbConfig::CONFIG['DLEXT']} #{@lib_dir}/
        or install the gem (gem install narwhal), which builds it at install time.
      MSG
    end
  end
end
