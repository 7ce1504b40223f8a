# frozen_string_literal: true

require "etc"

module Narwhal
  class Configurator
    # The object a config file is evaluated in: its public methods are the
    # directives. Each validates its argument; a bad one is noted with its
    # line and the file read on: one run reports every problem of the file.
    class DSL
      # Directives kept in files of their own.
      MIXINS = [Paths, Recycling, MasterListeners, Queueing, Upgrades].freeze
      MIXINS.each { |mixin| include mixin }

      def initialize(config)
        @config = config
        @problems = [] # Strings, and Procs for what the whole file decides
        @puma_preload = false # Puma's preload_app! seen (its hints depend on it)
      end

      def listen(address, options = {})
        check(address.is_a?(String) || address.is_a?(Integer), "listen expects an address String")
        check(options.is_a?(Hash), "listen options must be a Hash")
        options = listen_numbers(options)
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
                   response_spool_max: 0, response_spool_file_max: 0, response_spool_disk_max: 0,
                   response_spool_disk_reserve: 0 }.freeze
      NUMBERS = { timeout: 0.001, keepalive_timeout: 0, client_timeout: 0.001, client_header_timeout: 0.001,
                  client_body_timeout: 0.001, write_timeout: 0.001, drain_delay: 0, graceful_timeout: 0.001 }.freeze
      # trust_x_forwarded is accepted for Unicorn configs: narwhal leaves
      # rack.url_scheme alone; Rack::Request#scheme and #ssl? read
      # X-Forwarded-Proto themselves.
      BOOLEANS = %i[preload_app early_hints rewindable_input check_client_connection default_middleware
                    worker_exec trust_x_forwarded trust_x_request_start term_graceful control_status_paths
                    orca_load_report].freeze

      INTEGERS.each { |name, min| define_method(name) { |value| set_integer(name, value, min: min) } }
      NUMBERS.each { |name, min| define_method(name) { |value| set_number(name, value, min: min) } }
      BOOLEANS.each { |name| define_method(name) { |value| set_boolean(name, value) } }

      HOOKS.each do |name, arity|
        define_method(name) do |callable = nil, &block|
          hook = callable || block
          check(hook.respond_to?(:call), "#{name} expects a block or a callable")
          # Unicorn's rule: a Proc must take exactly the hook's arguments
          if hook.is_a?(Proc) && hook.arity >= 0 && hook.arity != arity
            # Puma's before_fork takes no arguments and runs once
            puma = name == :before_fork && hook.arity.zero? ? ": #{PumaDirectives::BEFORE_FORK}" : ""
            fail_at("#{name} has invalid arity #{hook.arity} (needs #{arity}: #{HOOK_ARGS.fetch(name)})#{puma}")
          end
          @config.settings[name] = hook
        end
      end

      def worker_processes(count)
        count = count == "auto" ? :auto : Numbers.integer(count)
        check(count == :auto || (count.is_a?(Integer) && count >= 1),
              "worker_processes expects an Integer >= 1 or :auto, got #{count.inspect}")
        @config.worker_processes = count
        check_total_threads
      end

      # Puma's `threads MIN, MAX` reads the same when both are equal.
      def threads(count, max = count)
        count = Numbers.integer(count)
        max = Numbers.integer(max)
        check(max == count, "narwhal runs a fixed number of threads per worker: use threads #{max.inspect}")
        problem = @config.threads_problem(count)
        check(problem.nil?, problem)
        @config.settings[:threads] = count
        check_total_threads
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
        seconds = Numbers.seconds(seconds)
        check(seconds.nil? || (seconds.is_a?(Numeric) && seconds.positive?),
              "soft_timeout expects a number of seconds > 0 (or nil: off), got #{seconds.inspect}")
        check(options.is_a?(Hash) && options.keys.all?(:keep_worker) &&
              [true, false].include?(options.fetch(:keep_worker, false)),
              "soft_timeout's one option is keep_worker: true or false, got #{options.inspect}")
        @soft_timeout_line = config_line
        @config.settings[:soft_timeout] = seconds
        @config.settings[:soft_timeout_keep_worker] = options.fetch(:keep_worker, false)
      end

      # Every problem noted, in the file's order, as "file:line: what";
      # whole_file: false when the file stopped half-way (a Ruby error), so
      # that what the lines not run would have set is not judged.
      def problems(whole_file: true)
        check_whole_file if whole_file
        @problems.map { |problem| problem.is_a?(Proc) ? problem.call : problem }
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

      # Unknown names and Puma's directives; the advice is written once the
      # whole file is read (on_worker_boot's depends on preload_app).
      def method_missing(name, *args)
        @puma_preload = true if name == :preload_app!
        line = config_line
        @problems << lambda {
          preload = @config.settings[:preload_app] || @puma_preload
          "#{line}: #{UnknownDirective.message(name, args, self.class.directives, preload: preload)}"
        }
        nil
      end

      def self.directives
        (public_instance_methods(false) + MIXINS.flat_map(&:public_instance_methods)) -
          %i[method_missing respond_to_missing? problems]
      end

      def respond_to_missing?(*) = false

      private

      # What one directive cannot check alone, after the last line ran.
      def check_whole_file
        resolve_paths
        soft = @config.settings[:soft_timeout]
        timeout = @config.settings[:timeout]
        return unless soft && soft >= timeout

        @problems << "#{@soft_timeout_line}: soft_timeout #{soft} must be below timeout (#{timeout}): " \
                     "the master kills the worker at timeout, so the soft timeout would never come"
      end

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
        value = Numbers.integer(value)
        check(value.is_a?(Integer) && value >= min, "#{key} expects an Integer >= #{min}, got #{value.inspect}")
        @config.settings[key] = value
      end

      def set_number(key, value, min:)
        value = Numbers.seconds(value)
        check(value.is_a?(Numeric) && value >= min, "#{key} expects a number >= #{min}, got #{value.inspect}")
        @config.settings[key] = value
      end

      # umask stays as given: "022" would read as decimal
      NUMERIC_LISTEN_OPTIONS = { backlog: :integer, rcvbuf: :integer, sndbuf: :integer, tries: :integer,
                                 tcp_defer_accept: :integer, delay: :seconds }.freeze

      def listen_numbers(options)
        options.to_h do |key, value|
          kind = NUMERIC_LISTEN_OPTIONS[key]
          [key, kind ? Numbers.public_send(kind, value) : value]
        end
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

      # Around every directive: its problem is noted, and the file goes on.
      module NotesProblems; end
      directives.each do |name|
        NotesProblems.define_method(name) do |*args, &block|
          super(*args, &block)
        rescue ConfigError => e
          @problems << e.message
          nil
        end
      end
      prepend NotesProblems
    end
  end
end
