# frozen_string_literal: true

module Narwhal
  # Loads the rackup file into a Rack app, adding rackup's default
  # middleware for the RACK_ENV the way Unicorn does (unless -N or
  # `default_middleware false`): development gets Rack::CommonLogger,
  # Rack::ShowExceptions and Rack::Lint, deployment gets Rack::CommonLogger.
  class AppBuilder
    # allow_default_middleware: false for -N, which no config file can undo
    def initialize(path, requires: [], allow_default_middleware: true)
      @path = path
      @requires = requires
      @allowed = allow_default_middleware
      @default_middleware = true
    end

    # The config file's `default_middleware` (read again on HUP).
    attr_writer :default_middleware
    attr_reader :path

    def default_middleware?
      @allowed && @default_middleware
    end

    # Raises BootError, naming the file and line at fault, when the app
    # (or a -r library) does not load.
    def call
      @requires.each { |lib| require_library(lib) }
      raise BootError, "rackup file #{@path} not found" unless File.exist?(@path)

      require "rack"
      require "rack/builder"
      app = Rack::Builder.parse_file(@path)
      app = app.first if app.is_a?(Array) # Rack 2 returns [app, options]
      default_middleware? ? wrap(app, ENV.fetch("RACK_ENV", "development")) : app
    rescue ScriptError, StandardError => e
      raise BootError.from(e)
    end

    private

    # -r LIB: a library that is not there is the command line's fault, not
    # a line of the user's code
    def require_library(lib)
      require lib
    rescue LoadError => e
      raise BootError, "-r #{lib}: #{e.message}" if e.path == lib

      raise
    end

    def wrap(app, env)
      case env
      when "development"
        require "rack/common_logger"
        require "rack/show_exceptions"
        require "rack/lint"
        Rack::CommonLogger.new(Rack::ShowExceptions.new(Rack::Lint.new(app)), $stderr)
      when "deployment"
        require "rack/common_logger"
        Rack::CommonLogger.new(app, $stderr)
      else
        app
      end
    end
  end
end
