# frozen_string_literal: true

require "etc"
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

    # Unicorn's hook defaults: no-ops, except that a reaped worker is logged.
    NOOP_HOOK = ->(*) {}
    LOG_EXIT_HOOK = lambda do |server, worker, status|
      message = "reaped #{status.inspect} worker=#{worker.nr}"
      status.success? ? server.logger.info(message) : server.logger.error(message)
    end
    HOOKS = { before_fork: 2, after_fork: 2, after_worker_ready: 2, after_worker_exit: 3, before_exec: 1 }.freeze
    HOOK_ARGS = { before_fork: "|server, worker|", after_fork: "|server, worker|",
                  after_worker_ready: "|server, worker|", after_worker_exit: "|server, worker, status|",
                  before_exec: "|server|" }.freeze

    DEFAULTS = {
      listeners: [],
      logger: nil,
      worker_processes: 1,
      threads: 1,
      worker_connections: 1000,
      timeout: 60,
      soft_timeout: nil,
      soft_timeout_keep_worker: false,
      preload_app: false,
      before_fork: NOOP_HOOK,
      after_fork: NOOP_HOOK,
      after_worker_ready: NOOP_HOOK,
      after_worker_exit: LOG_EXIT_HOOK,
      before_exec: NOOP_HOOK,
      pid: nil,
      stderr_path: nil,
      stdout_path: nil,
      working_directory: nil,
      user: nil,
      rewindable_input: true,
      check_client_connection: false,
      default_middleware: true,
      worker_exec: false,
      trust_x_forwarded: true,
      early_hints: false,
      client_body_buffer_size: 112 * KIB,
      client_max_body_size: 1 * GIB,
      max_request_line: 16 * KIB,
      max_header_size: 112 * KIB,
      max_header_fields: 100,
      keepalive_timeout: 5,
      keepalive_requests: 1000,
      client_timeout: 30,
      client_header_timeout: nil, # nil: client_timeout's value
      client_body_timeout: nil,
      write_timeout: 30,
      response_buffer_size: 64 * KIB,
      response_spool_max: 256 * MIB,
      default_listen: "127.0.0.1:8080"
    }.freeze
    CLIENT_TIMEOUT_PARTS = %i[client_header_timeout client_body_timeout].freeze

    # Request threads per worker at most, and in all workers together: the
    # scoreboard has a sub-slot per thread, and beyond these the GVL leaves
    # threads waiting rather than serving.
    MAX_THREADS = 256
    MAX_TOTAL_THREADS = 4096

    attr_reader :settings, :file

    def initialize(file: nil)
      @settings = DEFAULTS.dup
      @settings[:listeners] = []
      @settings[:worker_processes] = WebConcurrency.worker_processes || DEFAULTS[:worker_processes]
      @file = file
      load_file(file) if file
      # client_timeout is the umbrella: it sets each part not given on its own
      CLIENT_TIMEOUT_PARTS.each { |part| @settings[part] ||= @settings[:client_timeout] }
    end

    # --threads N: wins over the config file.
    def threads_flag(count)
      problem = threads_problem(count) || total_threads_problem(@settings[:worker_processes], count)
      raise ConfigError, "--threads #{count}: #{problem}" if problem

      @settings[:threads] = count
    end

    def threads_problem(count)
      return if count.is_a?(Integer) && count.between?(1, MAX_THREADS)

      "threads expects an Integer from 1 to #{MAX_THREADS}, got #{count.inspect}"
    end

    def total_threads_problem(workers, threads)
      return if workers * threads <= MAX_TOTAL_THREADS

      "worker_processes #{workers} x threads #{threads} is more than #{MAX_TOTAL_THREADS} request threads"
    end

    def [](key)
      @settings.fetch(key)
    end

    # The configuration read again from the same file (HUP).
    def reload
      self.class.new(file: @file)
    end

    LISTEN_OPTIONS = %i[backlog rcvbuf sndbuf tcp_nodelay tcp_nopush ipv6only reuseport umask tries delay
                        tcp_defer_accept accept_filter].freeze

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
      dsl = DSL.new(self)
      dsl.instance_eval(read_file(path), File.expand_path(path), 1)
      dsl.check_whole_file
    rescue ConfigError
      raise
    rescue ScriptError, StandardError => e
      raise ConfigError, ErrorMessage.in_file(e, path).sub("#{DSL.name}::", "")
    end

    def read_file(path)
      File.read(path)
    rescue SystemCallError => e
      raise ConfigError, "cannot read config file #{path}: #{ErrorMessage.strerror(e)}"
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
                  client_body_timeout: 0.001, write_timeout: 0.001 }.freeze
      # trust_x_forwarded is accepted for Unicorn configs: narwhal leaves
      # rack.url_scheme alone; Rack::Request#scheme and #ssl? read
      # X-Forwarded-Proto themselves.
      BOOLEANS = %i[preload_app early_hints rewindable_input check_client_connection default_middleware
                    worker_exec trust_x_forwarded].freeze

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
        set_integer(:worker_processes, count, min: 1)
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
        public_instance_methods(false) - %i[method_missing respond_to_missing? check_whole_file]
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

      # The first frame outside this file is the config line at fault.
      def config_line
        frame = caller_locations.find { |l| l.path != __FILE__ }
        "#{frame&.path}:#{frame&.lineno}"
      end
    end
  end
end
