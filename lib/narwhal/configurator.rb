# frozen_string_literal: true

require "logger"

module Narwhal
  # The configuration DSL (`-c FILE`) and the settings it produces.
  #
  # Directive names follow Unicorn's; every setting has a default here and a
  # line in docs/CONFIGURATION.md.
  class Configurator
    KIB = 1024
    MIB = 1024 * KIB
    GIB = 1024 * MIB

    DEFAULTS = {
      listeners: [],
      logger: nil,
      early_hints: false,
      client_body_buffer_size: 112 * KIB,
      client_max_body_size: 1 * GIB,
      max_request_line: 16 * KIB,
      max_header_size: 112 * KIB,
      max_header_fields: 100,
      keepalive_timeout: 5,
      keepalive_requests: 1000,
      client_timeout: 30,
      write_timeout: 30,
      default_listen: "127.0.0.1:8080"
    }.freeze

    attr_reader :settings

    def initialize(file: nil)
      @settings = DEFAULTS.dup
      @settings[:listeners] = []
      @file = file
      load_file(file) if file
    end

    def [](key)
      @settings.fetch(key)
    end

    LISTEN_OPTIONS = %i[backlog].freeze

    # Adds a listen address (the later options win for a repeated one).
    def add_listener(address, options = {})
      @settings[:listeners].reject! { |(addr, _)| addr == address }
      @settings[:listeners] << [address, options]
    end

    # [[address, options], ...]; the default address when none was given.
    def listeners
      list = @settings[:listeners]
      list.empty? ? [[@settings[:default_listen], {}]] : list
    end

    def logger
      @settings[:logger] ||= Logger.new($stderr, level: Logger::INFO)
    end

    private

    def load_file(path)
      source = File.read(path)
      DSL.new(self).instance_eval(source, File.expand_path(path), 1)
    rescue ConfigError
      raise
    rescue Errno::ENOENT, Errno::EACCES => e
      raise ConfigError, "cannot read config file: #{e.message}"
    rescue ScriptError, StandardError => e
      raise ConfigError, "#{location(e, path)}: #{e.message} (#{e.class})"
    end

    def location(error, path)
      full = File.expand_path(path)
      frame = error.backtrace_locations&.find { |l| l.absolute_path == full || l.path == full }
      line = frame&.lineno || error.message[/:(\d+):/, 1]
      "#{path}:#{line || '?'}"
    end

    # The object a config file is evaluated in: its public methods are the
    # directives. Each validates its argument and raises with the config
    # file's line on bad input.
    class DSL
      def initialize(config)
        @config = config
      end

      def listen(address, options = {})
        check(address.is_a?(String) || address.is_a?(Integer), "listen expects an address String")
        check(options.is_a?(Hash), "listen options must be a Hash")
        unknown = options.keys - LISTEN_OPTIONS
        check(unknown.empty?, "unsupported listen option(s) #{unknown.inspect}")
        if options.key?(:backlog)
          check(options[:backlog].is_a?(Integer) && options[:backlog] > 0, "backlog expects a positive Integer")
        end
        @config.add_listener(address.to_s, options)
      end

      def early_hints(bool)
        set_boolean(:early_hints, bool)
      end

      def client_body_buffer_size(bytes)
        set_integer(:client_body_buffer_size, bytes, min: 0)
      end

      def client_max_body_size(bytes)
        if bytes.nil?
          @config.settings[:client_max_body_size] = nil
        else
          set_integer(:client_max_body_size, bytes, min: 1)
        end
      end

      def max_request_line(bytes)
        set_integer(:max_request_line, bytes, min: 64)
      end

      def max_header_size(bytes)
        set_integer(:max_header_size, bytes, min: 256)
      end

      def max_header_fields(count)
        set_integer(:max_header_fields, count, min: 1)
      end

      def keepalive_timeout(seconds)
        set_number(:keepalive_timeout, seconds, min: 0)
      end

      def keepalive_requests(count)
        set_integer(:keepalive_requests, count, min: 1)
      end

      def client_timeout(seconds)
        set_number(:client_timeout, seconds, min: 0.001)
      end

      def write_timeout(seconds)
        set_number(:write_timeout, seconds, min: 0.001)
      end

      def logger(obj)
        %i[debug info warn error fatal].each do |m|
          check(obj.respond_to?(m), "logger must respond to #{m}")
        end
        @config.settings[:logger] = obj
      end

      def method_missing(name, *)
        fail_at("unknown directive #{name.inspect}")
      end

      def respond_to_missing?(*) = false

      private

      def set_boolean(key, value)
        check(value == true || value == false, "#{key} expects true or false, got #{value.inspect}")
        @config.settings[key] = value
      end

      def set_integer(key, value, min:)
        check(value.is_a?(Integer) && value >= min, "#{key} expects an Integer >= #{min}, got #{value.inspect}")
        @config.settings[key] = value
      end

      def set_number(key, value, min:)
        check(value.is_a?(Numeric) && value >= min, "#{key} expects a number >= #{min}, got #{value.inspect}")
        @config.settings[key] = value
      end

      def check(ok, message)
        fail_at(message) unless ok
      end

      # The first frame outside this file is the config line at fault.
      def fail_at(message)
        frame = caller_locations.find { |l| l.path != __FILE__ }
        raise ConfigError, "#{frame&.path}:#{frame&.lineno}: #{message}"
      end
    end
  end
end
