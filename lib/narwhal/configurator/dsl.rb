# frozen_string_literal: true

require "etc"

module Narwhal
  class Configurator
    # The object a config file is evaluated in: its public methods are the
    # directives. Each validates its argument and raises with the config
    # file's line on bad input.
    class DSL
      include Recycling

      def initialize(config)
        @config = config
      end

      def listen(address, options = {})
        check(address.is_a?(String) || address.is_a?(Integer), "listen expects an address String")
        check(options.is_a?(Hash), "listen options must be a Hash")
        unknown = options.keys - LISTEN_OPTIONS
        fail_at(UnknownDirective.listen_options(unknown, LISTEN_OPTIONS)) unless unknown.empty?
        problem = Listener.option_problem(options)
        check(problem.nil?, "listen #{problem}")
        begin
          Listener.parse(address)
        rescue ArgumentError => e
          fail_at(e.message)
        end
        @config.add_listener(address.to_s, options)
      end

      # The master's control listener (/metrics, /health, /ready, /status):
      # an address as `listen` takes it, nil for none.
      def control_listen(address)
        check(address.nil? || address.is_a?(String) || address.is_a?(Integer),
              "control_listen expects an address String (or nil: none), got #{address.inspect}")
        begin
          Listener.parse(address) if address
        rescue ArgumentError => e
          fail_at("control_listen: #{e.message}")
        end
        @config.settings[:control_listen] = address&.to_s
      end

      # Unicorn's plural form: replaces every address given so far.
      def listeners(addresses)
        check(addresses.is_a?(Array), "listeners expects an Array of addresses")
        @config.settings[:listeners] = []
        addresses.each { |address| listen(address) }
      end

      # Directives that only check a type and a lower bound.
      INTEGERS = { worker_connections: 1, client_body_buffer_size: 0, max_request_line: 64, max_header_size: 256,
                   max_header_fields: 1, keepalive_requests: 1, response_buffer_size: 0,
                   response_spool_max: 0 }.freeze
      NUMBERS = { timeout: 0.001, keepalive_timeout: 0, client_timeout: 0.001, client_header_timeout: 0.001,
                  client_body_timeout: 0.001, write_timeout: 0.001, drain_delay: 0, graceful_timeout: 0.001 }.freeze
      # trust_x_forwarded is accepted for Unicorn configs: narwhal leaves
      # rack.url_scheme alone; Rack::Request#scheme and #ssl? read
      # X-Forwarded-Proto themselves.
      BOOLEANS = %i[preload_app early_hints rewindable_input check_client_connection default_middleware
                    worker_exec trust_x_forwarded term_graceful control_status_paths].freeze

      INTEGERS.each { |name, min| define_method(name) { |value| set_integer(name, value, min: min) } }
      NUMBERS.each { |name, min| define_method(name) { |value| set_number(name, value, min: min) } }
      BOOLEANS.each { |name| define_method(name) { |value| set_boolean(name, value) } }
      # relative to working_directory when one was given before, else the start directory
      %i[pid stderr_path stdout_path].each { |name| define_method(name) { |path| set_path(name, path) } }

      HOOKS.each do |name, arity|
        define_method(name) do |callable = nil, &block|
          hook = callable || block
          check(hook.respond_to?(:call), "#{name} expects a block or a callable")
          # Unicorn's rule: a Proc must take exactly the hook's arguments
          if hook.is_a?(Proc) && hook.arity >= 0 && hook.arity != arity
            # Puma's before_fork takes no arguments and runs once
            puma = name == :before_fork && hook.arity.zero? ? ": it runs before each worker is forked" : ""
            fail_at("#{name} has invalid arity #{hook.arity} (needs #{arity}: #{HOOK_ARGS.fetch(name)})#{puma}")
          end
          @config.settings[name] = hook
        end
      end

      def worker_processes(count)
        check(count == :auto || (count.is_a?(Integer) && count >= 1),
              "worker_processes expects an Integer >= 1 or :auto, got #{count.inspect}")
        @config.worker_processes = count
        check_total_threads
      end

      # Puma's `threads MIN, MAX` reads the same when both are equal.
      def threads(count, max = count)
        check(max == count, "narwhal runs a fixed number of threads per worker: use threads #{max.inspect}")
        problem = @config.threads_problem(count)
        check(problem.nil?, problem)
        @config.settings[:threads] = count
        check_total_threads
      end

      def working_directory(path)
        check(path.is_a?(String), "working_directory expects a path String")
        dir = File.expand_path(path)
        check(File.directory?(dir), "working_directory #{dir} is not a directory")
        @config.settings[:working_directory] = dir
        # like Unicorn, later relative paths are relative to it, and USR2
        # starts the new master there (a symlinked release path stays one)
        @base_dir = dir
        START_CTX[:cwd] = path.start_with?("/") ? path : dir
      end

      def user(user, group = nil)
        check(user.is_a?(String), "user expects a user name String")
        check(group.nil? || group.is_a?(String), "user expects a group name String or nil")
        check(exists?(:getpwnam, user), "user #{user} does not exist on this machine")
        check(group.nil? || exists?(:getgrnam, group), "group #{group} does not exist on this machine")
        @config.settings[:user] = [user, group]
      end

      # soft_timeout SECONDS, keep_worker: false; nil turns it off. Checked
      # against timeout once the whole file is read (either may come first).
      def soft_timeout(seconds, options = {})
        check(seconds.nil? || (seconds.is_a?(Numeric) && seconds.positive?),
              "soft_timeout expects a number of seconds > 0 (or nil: off), got #{seconds.inspect}")
        check(options.is_a?(Hash) && options.keys.all?(:keep_worker) &&
              [true, false].include?(options.fetch(:keep_worker, false)),
              "soft_timeout's one option is keep_worker: true or false, got #{options.inspect}")
        @soft_timeout_line = config_line
        @config.settings[:soft_timeout] = seconds
        @config.settings[:soft_timeout_keep_worker] = options.fetch(:keep_worker, false)
      end

      # What one directive cannot check alone, after the last line ran.
      def check_whole_file
        soft = @config.settings[:soft_timeout]
        timeout = @config.settings[:timeout]
        return unless soft && soft >= timeout

        raise ConfigError, "#{@soft_timeout_line}: soft_timeout #{soft} must be below timeout (#{timeout}): " \
                           "the master kills the worker at timeout, so the soft timeout would never come"
      end

      # access_log PATH, format: :combined (default) or :json; nil: off.
      # Relative to working_directory, as the other paths. The workers open
      # it (after switching user): the master checks what it can now.
      def access_log(path, options = {})
        return @config.settings[:access_log] = nil if path.nil?

        check(path.is_a?(String) && !path.empty?, "access_log expects a path String (or nil: off), got #{path.inspect}")
        check(options.is_a?(Hash) && (options.keys - [:format]).empty?,
              "access_log's one option is format: :combined or :json, got #{options.inspect}")
        format = options.fetch(:format, AccessLog::DEFAULT_FORMAT)
        format = format.to_sym if format.is_a?(String)
        check(AccessLog::FORMATS.key?(format),
              "access_log format: must be :combined or :json, got #{options[:format].inspect}")
        full = File.expand_path(path, @base_dir || Dir.pwd)
        problem = AccessLog.path_problem(full)
        check(problem.nil?, "access_log #{full}: #{problem}")
        @config.settings[:access_log] = [full, format]
      end

      def client_max_body_size(bytes)
        if bytes.nil?
          @config.settings[:client_max_body_size] = nil
        else
          set_integer(:client_max_body_size, bytes, min: 1)
        end
      end

      def logger(obj)
        %i[debug info warn error fatal].each do |m|
          check(obj.respond_to?(m), "logger must respond to #{m}")
        end
        @config.settings[:logger] = obj
      end

      def method_missing(name, *args)
        fail_at(UnknownDirective.message(name, args, self.class.directives))
      end

      def self.directives
        (public_instance_methods(false) + Recycling.public_instance_methods) - %i[method_missing respond_to_missing? check_whole_file]
      end

      def respond_to_missing?(*) = false

      private

      # At the later of worker_processes and threads: their product is capped.
      def check_total_threads
        problem = @config.total_threads_problem(@config.settings[:worker_processes], @config.settings[:threads])
        check(problem.nil?, problem)
      end

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

      def set_path(key, path)
        check(path.nil? || path.is_a?(String), "#{key} expects a path String or nil")
        @config.settings[key] = path && File.expand_path(path, @base_dir || Dir.pwd)
      end

      def exists?(lookup, name)
        Etc.public_send(lookup, name) && true
      rescue ArgumentError
        false
      end

      def check(ok, message)
        fail_at(message) unless ok
      end

      def fail_at(message)
        raise ConfigError, "#{config_line}: #{message}"
      end

      # The first frame outside the DSL's files is the config line at fault.
      def config_line
        frame = caller_locations.find { |l| !l.path.start_with?("#{__dir__}/") }
        "#{frame&.path}:#{frame&.lineno}"
      end
    end
  end
end
