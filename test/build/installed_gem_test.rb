# frozen_string_literal: true

require "test_helper"
require "rbconfig"

# What `gem install narwhal` gives a user: narwhal-*.gem built from
# narwhal.gemspec, installed (extension compiled from the gem's own files)
# into a scratch GEM_HOME, and its `narwhal` executable serving a config.ru
# that lives outside the repo, in an environment with nothing of the repo or
# of Bundler in it. The rest of the suite runs from the source tree, so a
# file the gemspec forgets fails here and nowhere else.
#
# The gem is built and installed once for the class: compiling the extension
# is the slow part.
class InstalledGemTest < Minitest::Test
  ROOT = File.expand_path("../..", __dir__)
  BUILD_TIMEOUT = 300 # compiling the extension on a loaded 2-core machine

  # A narwhal started from the installed gem's executable; the rest (log,
  # port, stop by pid) is ServerProcess's.
  class InstalledServer < Narwhal::ServerProcess
    def initialize(exe:, dir:, env:)
      @dir = dir
      @log_path = File.join(dir, "server.log")
      # no config.ru argument: a newcomer runs `narwhal` where config.ru is
      @pid = Process.spawn(env, exe, "-l", "127.0.0.1:0",
                           chdir: dir, out: @log_path, err: @log_path, pgroup: true, unsetenv_others: true)
    end
  end

  # One scratch GEM_HOME with the gem installed, shared by the tests.
  class Installation
    attr_reader :root, :gem_home, :gem_dir

    def initialize
      @root = Dir.mktmpdir("installed-gem")
      @gem_home = File.join(@root, "gem_home")
    end

    # Builds and installs on the first call. A failure is reported in full
    # once; later callers get a short pointer to it.
    def install!
      return self if @gem_dir
      raise Minitest::Assertion, "the gem did not build or install (reported above)" if @failed

      @failed = true
      gem = File.join(@root, "narwhal.gem")
      run!(base_env, gem_command("build", "narwhal.gemspec", "--output", gem), chdir: ROOT)
      # --local: rack comes from the gems already on this machine, never
      # from the network
      run!(env, gem_command("install", "--local", "--no-document", gem), chdir: @root)
      @gem_dir = Dir[File.join(@gem_home, "gems", "narwhal-*")].first or
        raise Minitest::Assertion, "no narwhal-* in #{@gem_home}/gems after gem install"
      @failed = false
      self
    end

    def executable
      File.join(@gem_home, "bin", "narwhal")
    end

    # Only what a shell on a fresh machine has, plus where gems live: no
    # RUBYLIB, RUBYOPT or BUNDLE_*, no -I of the repo. HOME is scratch so that
    # no ~/.gemrc or user gem directory takes part.
    def env
      base_env.merge("GEM_HOME" => @gem_home, "GEM_PATH" => [@gem_home, rack_gem_dir].join(File::PATH_SEPARATOR))
    end

    def remove
      FileUtils.rm_rf(@root)
    end

    private

    def base_env
      { "PATH" => ENV.fetch("PATH"), "HOME" => File.join(@root, "home"), "LANG" => "C.UTF-8" }
        .merge(Narwhal::LeftoverProcesses.env) # not read by narwhal: finds what a test left running
    end

    # Where the Rack this suite runs on is installed: the installed gem
    # resolves its rack dependency there, picking the newest it allows.
    def rack_gem_dir
      Gem::Specification.find_by_name("rack", ">= 2.2", "< 4").base_dir
    end

    def gem_command(*args)
      [RbConfig.ruby, "-S", "gem", *args]
    end

    # Runs a command to completion within BUILD_TIMEOUT; fails with its output.
    def run!(env, argv, chdir:)
      log = File.join(@root, "command.log")
      pid = Process.spawn(env, *argv, chdir: chdir, out: log, err: log, pgroup: true, unsetenv_others: true)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + BUILD_TIMEOUT
      until (status = Process.waitpid2(pid, Process::WNOHANG)&.last)
        if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
          Process.kill(:KILL, -pid)
          Process.wait(pid)
          raise Minitest::Assertion, "#{argv.join(' ')}: still running after #{BUILD_TIMEOUT}s:\n#{File.read(log)}"
        end
        sleep 0.05
      end
      return if status.success?

      raise Minitest::Assertion, "#{argv.join(' ')} failed (#{status}):\n#{File.read(log)}"
    end
  end

  def self.installation
    @installation ||= Installation.new.tap { |i| Minitest.after_run { i.remove } }
  end

  def installation
    self.class.installation.install!
  end

  def teardown
    @server&.stop
  end

  def test_the_installed_executable_serves_a_config_ru_outside_the_repo
    installed = installation
    app_dir = Dir.mktmpdir("installed-gem-app")
    File.write(File.join(app_dir, "config.ru"), <<~'RU')
      # every narwhal file this process loaded, one per line
      run ->(env) { [200, { "content-type" => "text/plain" }, [$LOADED_FEATURES.grep(/narwhal/).join("\n")]] }
    RU
    @server = InstalledServer.new(exe: installed.executable, dir: app_dir, env: installed.env)
    @server.wait_ready(timeout: 30)

    c = @server.connect
    c.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    r = begin
      c.read_response(timeout: 10)
    rescue Timeout::Error
      flunk "no response in 10 s; the server's log:\n#{@server.log}"
    end
    assert_equal 200, r.status, "#{r.status_line}\n#{r.body}"
    loaded = r.body.split("\n")
    gem_lib = File.join(installed.gem_dir, "lib")
    assert_includes loaded, File.join(gem_lib, "narwhal.rb")
    so = loaded.grep(%r{/narwhal_http/narwhal_http\.so\z})
    assert_equal 1, so.size, "the C extension, loaded once: #{loaded.inspect}"
    outside = loaded.reject { |path| path.start_with?("#{installed.gem_home}/") }
    assert_empty outside, "narwhal loaded from outside the installed gem (repo: #{ROOT})"
  ensure
    c&.close
  end

  # Files the server only loads on some paths (-D, a pid file, rackup) are
  # not reached by one request: every file git tracks under lib/, ext/ and
  # exe/ must be in the installed gem.
  def test_the_installed_gem_holds_every_tracked_file_of_lib_ext_and_exe
    tracked = IO.popen(%w[git ls-files -z lib ext exe], chdir: ROOT, &:read).split("\0")
    assert $?.success?, "git ls-files failed in #{ROOT}"
    refute_empty tracked
    missing = tracked.reject { |path| File.file?(File.join(installation.gem_dir, path)) }
    assert_empty missing, "in the repo but not in the gem (narwhal.gemspec's files)"
  end
end
