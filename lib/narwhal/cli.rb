# frozen_string_literal: true

require "optparse"

module Narwhal
  # `narwhal [options] [config.ru]`: Unicorn's command line. `narwhal
  # status ...` is StatusCommand's.
  class CLI
    autoload :Daemon, "narwhal/cli/daemon"
    autoload :StatusCommand, "narwhal/cli/status_command"

    # Where `-h` sends people: docs/ ships in the gem.
    DOCS = File.expand_path("../../docs", __dir__)

    def self.start(argv)
      return StatusCommand.start(argv.drop(1)) if argv.first == "status"
      # not a rackup file named "help"
      return new(["-h"]).run if argv == ["help"]

      new(argv).run
    end

    def initialize(argv)
      @original_argv = argv.dup
      @argv = argv.dup
      @listen = []
      @host = nil
      @port = nil
      @config_file = nil
      @requires = []
      @daemonize = false
      @default_middleware = true
      @threads = nil
      @flags = [] # -E, -I, -w, -d as given, for the re-exec'd command line
      # where a person started us, with a symlinked path (/app/current) kept
      @launch_dir = START_CTX[:cwd]
    end

    def run
      parse_options
      config = Configurator.new(file: @config_file)
      listen_flags.each { |addr| config.add_listener(addr) }
      config.threads_flag(@threads) if @threads
      # a relative rackup path is found in working_directory, as in Unicorn
      rackup = File.expand_path(@argv.first || "config.ru", config[:working_directory] || @launch_dir)
      resolve_start_ctx(rackup)
      builder = AppBuilder.new(rackup, requires: @requires, allow_default_middleware: @default_middleware)
      builder.default_middleware = config[:default_middleware]
      # fail before forking anything when the rackup file is missing
      raise ArgumentError, "rackup file #{builder.path} not found" unless File.exist?(builder.path)

      daemon = Daemon.daemonize if @daemonize
      boot(config, builder, daemon)
    rescue ConfigError, Listener::Error, OptionParser::ParseError => e
      warn e.message.gsub(/^/, "narwhal: ") # a config error has a line per problem
      1
    rescue SystemCallError, ArgumentError, LoadError => e
      warn "narwhal: #{ErrorMessage.for(e)}"
      1
    end

    private

    def boot(config, builder, daemon)
      master = Master.new(config, builder, daemon: daemon)
      master.start
      master.join
    rescue BootError => e
      message = "the app failed to load: #{e.message}"
      daemon&.failed(message)
      warn "narwhal: #{message}"
      1
    rescue Exception => e # rubocop:disable Lint/RescueException
      daemon&.failed(ErrorMessage.for(e))
      raise
    end

    def parse_options
      OptionParser.new do |o|
        o.banner = "Usage: narwhal [options] [config.ru]"
        server_options(o)
        ruby_options(o)
        help_footer(o)
      end.parse!(@argv)
      ENV["RACK_ENV"] ||= "development"
    end

    # Unicorn's and rackup's flags for the server and the app.
    def server_options(o)
      o.on("-c", "--config-file FILE", "configuration file (Ruby DSL)") do |f|
        @config_file = File.expand_path(f, @launch_dir)
      end
      o.on("-E", "--env RACK_ENV", "RACK_ENV (default: development)") { |e| @flags.push("-E", ENV["RACK_ENV"] = e) }
      o.on("-D", "--daemonize", "run in the background") { @daemonize = true }
      o.on("-N", "--no-default-middleware", "no middleware added for RACK_ENV") { @default_middleware = false }
      o.on("--threads N", Integer, "request threads per worker process (default 1)") { |n| @threads = n }
      o.on("-l", "--listen ADDR", "host:port, :port or a Unix socket path (repeatable)") { |a| @listen << a }
      o.on("-o", "--host HOST", "listen on HOST (default 127.0.0.1)") { |h| @host = h }
      o.on("-p", "--port PORT", Integer, "listen on PORT (default 8080)") { |p| @port = p }
    end

    # Ruby's flags (-I, -r, -w, -d), version and help.
    def ruby_options(o)
      o.on("-I", "--include PATHS", "add PATHS (colon separated) to $LOAD_PATH") do |paths|
        $LOAD_PATH.unshift(*paths.split(":"))
        @flags.push("-I", paths)
      end
      o.on("-r", "--require LIB", "require LIB before loading the app") { |lib| @requires << lib }
      o.on("-w", "--warn", "turn on Ruby warnings") do
        $VERBOSE = true
        @flags << "-w"
      end
      o.on("-d", "--debug", "turn on debugging ($DEBUG)") do
        $DEBUG = true
        @flags << "-d"
      end
      o.on("-v", "--version", "print the version and exit") do
        puts "narwhal #{VERSION}"
        exit 0
      end
      o.on("-h", "--help", "print this help and exit") do
        puts o
        exit 0
      end
    end

    def help_footer(parser)
      parser.separator ""
      parser.separator "Commands:"
      parser.separator "    narwhal status [--control ADDR | -c FILE] [--json]"
      parser.separator "                                     a running server's workers, threads and listen queue " \
                       "(needs control_listen)"
      parser.separator "    narwhal help                     this help"
      parser.separator ""
      parser.separator "Docs: #{DOCS} (CONFIGURATION.md: every directive; SIGNALS.md; OPERATIONS.md; " \
                       "MIGRATING.md: from Unicorn, Puma, Passenger)"
    end

    # USR2 runs START_CTX again from START_CTX[:cwd], which working_directory
    # may have changed: give it the paths resolved here, the config file
    # first (relative to where we were started), so that the new master
    # finds the same files. Left alone if the config file set its own.
    def resolve_start_ctx(rackup)
      return unless START_CTX[:argv] == @original_argv && START_CTX[0] == $PROGRAM_NAME

      program = START_CTX[0]
      START_CTX[0] = File.expand_path(program, @launch_dir) if program.include?("/")
      START_CTX[:argv] = reexec_argv(rackup)
    end

    def reexec_argv(rackup)
      argv = @config_file ? ["-c", @config_file] : []
      argv << "-D" if @daemonize
      argv << "-N" unless @default_middleware
      @listen.each { |addr| argv.push("-l", addr) }
      argv.push("--threads", @threads.to_s) if @threads
      argv.push("-o", @host) if @host
      argv.push("-p", @port.to_s) if @port
      @requires.each { |lib| argv.push("-r", lib) }
      argv.concat(@flags) << rackup
    end

    def listen_flags
      list = @listen.dup
      list << "#{@host || '127.0.0.1'}:#{@port || 8080}" if @host || @port
      list
    end
  end
end
