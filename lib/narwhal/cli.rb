# frozen_string_literal: true

require "optparse"

module Narwhal
  # `narwhal [options] [config.ru]`: Unicorn's command line.
  class CLI
    def self.start(argv)
      new(argv).run
    end

    def initialize(argv)
      @argv = argv.dup
      @listen = []
      @host = nil
      @port = nil
      @config_file = nil
      @requires = []
    end

    def run
      parse_options
      config = Configurator.new(file: @config_file)
      listen_flags.each { |addr| config.add_listener(addr) }
      app = load_app(@argv.first || "config.ru")
      Server.new(app, config).run
      0
    rescue ConfigError, OptionParser::ParseError => e
      warn "narwhal: #{e.message}"
      1
    rescue SystemCallError, ArgumentError, LoadError => e
      warn "narwhal: #{e.class}: #{e.message}"
      1
    end

    private

    def parse_options
      OptionParser.new do |o|
        o.banner = "Usage: narwhal [options] [config.ru]"
        o.on("-c", "--config-file FILE", "configuration file (Ruby DSL)") { |f| @config_file = f }
        o.on("-E", "--env RACK_ENV", "RACK_ENV (default: development)") { |e| ENV["RACK_ENV"] = e }
        o.on("-l", "--listen ADDR", "host:port, :port or a Unix socket path (repeatable)") { |a| @listen << a }
        o.on("-o", "--host HOST", "listen on HOST (default 127.0.0.1)") { |h| @host = h }
        o.on("-p", "--port PORT", Integer, "listen on PORT (default 8080)") { |p| @port = p }
        o.on("-I", "--include PATHS", "add PATHS (colon separated) to $LOAD_PATH") do |paths|
          $LOAD_PATH.unshift(*paths.split(":"))
        end
        o.on("-r", "--require LIB", "require LIB before loading the app") { |lib| @requires << lib }
        o.on("-w", "--warn", "turn on Ruby warnings") { $VERBOSE = true }
        o.on("-d", "--debug", "turn on debugging ($DEBUG)") { $DEBUG = true }
        o.on("-v", "--version", "print the version and exit") do
          puts "narwhal #{VERSION}"
          exit 0
        end
        o.on("-h", "--help", "print this help and exit") do
          puts o
          exit 0
        end
      end.parse!(@argv)
      ENV["RACK_ENV"] ||= "development"
    end

    def listen_flags
      list = @listen.dup
      list << "#{@host || '127.0.0.1'}:#{@port || 8080}" if @host || @port
      list
    end

    def load_app(path)
      @requires.each { |lib| require lib }
      raise ArgumentError, "rackup file #{path} not found" unless File.exist?(path)

      require "rack"
      require "rack/builder"
      app = Rack::Builder.parse_file(path)
      app.is_a?(Array) ? app.first : app # Rack 2 returns [app, options]
    end
  end
end
