# frozen_string_literal: true

require "test_helper"

# `narwhal [options] [config.ru]` up to the boot: help and version, what it
# refuses (with status 1 and one "narwhal:" line per problem), and the
# command line USR2 runs again. Booting a server is
# test/integration/cli_test.rb's.
class NarwhalCLITest < Minitest::Test
  def setup
    @dir = Dir.mktmpdir("narwhal-cli")
    @saved_ctx = Narwhal::START_CTX.dup
  end

  def teardown
    Narwhal::START_CTX.replace(@saved_ctx)
    FileUtils.rm_rf(@dir)
  end

  # [exit status, stderr] of a run that stops before booting.
  def run_cli(argv)
    status = nil
    _, err = capture_io { with_env("RACK_ENV" => nil) { status = Narwhal::CLI.start(argv) } }
    [status, err]
  end

  def test_help_names_the_flags_the_commands_and_the_docs
    out, = capture_io { assert_raises(SystemExit) { Narwhal::CLI.start(["help"]) } }
    assert out.start_with?("Usage: narwhal [options] [config.ru]\n")
    %w[--config-file --env --daemonize --no-default-middleware --threads --listen --host --port --include
       --require --warn --debug --version --help].each { |flag| assert_includes out, flag }
    assert_includes out, "narwhal status [--control ADDR | -c FILE] [--json]"
    assert_includes out, "Docs: #{Narwhal::CLI::DOCS} "
    assert File.exist?(File.join(Narwhal::CLI::DOCS, "CONFIGURATION.md")), "the docs it names are there"
  end

  def test_what_it_refuses_is_one_line_each_and_status_1
    assert_equal [1, "narwhal: invalid option: --nope\n"], run_cli(["--nope"])
    assert_equal [1, "narwhal: missing argument: -c\n"], run_cli(["-c"])
    ru = File.join(@dir, "config.ru")
    assert_equal [1, "narwhal: rackup file #{ru} not found\n"], run_cli([ru])
    File.write(ru, "run ->(_) { [200, {}, []] }\n")
    assert_equal [1, "narwhal: --threads 0: threads expects an Integer from 1 to 256, got 0\n"],
                 run_cli(["--threads", "0", ru])
    conf = File.join(@dir, "narwhal.rb")
    File.write(conf, "frobnicate\nworkers 2\n")
    assert_equal [1, "narwhal: #{conf}:1: unknown directive frobnicate\nnarwhal: #{conf}:2: workers is a Puma " \
                     "directive: use worker_processes 2\n"], run_cli(["-c", conf, ru])
  end

  # USR2 runs the command line again from where the server was started;
  # working_directory may have moved the process since: the paths it names
  # are made absolute, every flag kept.
  def test_the_command_line_usr2_runs_again_has_absolute_paths
    Dir.mkdir(File.join(@dir, "app"))
    File.write(File.join(@dir, "app/narwhal.rb"), "")
    argv = ["-c", "app/narwhal.rb", "-l", "127.0.0.1:9001", "--threads", "2", "-p", "9002", "-N", "-E", "production",
            "app/missing.ru"]
    Narwhal::START_CTX.update(argv: argv, 0 => "bin/narwhal", cwd: @dir)
    saved_program = $PROGRAM_NAME
    $PROGRAM_NAME = "bin/narwhal"
    status, err = run_cli(argv)
    assert_equal [1, "narwhal: rackup file #{@dir}/app/missing.ru not found\n"], [status, err]
    assert_equal "#{@dir}/bin/narwhal", Narwhal::START_CTX[0]
    assert_equal ["-c", "#{@dir}/app/narwhal.rb", "-N", "-l", "127.0.0.1:9001", "--threads", "2", "-p", "9002",
                  "-E", "production", "#{@dir}/app/missing.ru"], Narwhal::START_CTX[:argv]
  ensure
    $PROGRAM_NAME = saved_program if saved_program
  end

  # A config file that set START_CTX itself (a binstub) keeps it.
  def test_a_start_ctx_the_config_changed_is_left_alone
    File.write(File.join(@dir, "narwhal.rb"), "Narwhal::START_CTX[:argv] = ['--from-config']\n")
    argv = ["-c", File.join(@dir, "narwhal.rb"), File.join(@dir, "missing.ru")]
    Narwhal::START_CTX.update(argv: argv, 0 => $PROGRAM_NAME)
    assert_equal 1, run_cli(argv).first
    assert_equal ["--from-config"], Narwhal::START_CTX[:argv]
  end
end
