# frozen_string_literal: true

module Narwhal
  class Configurator
    # The configuration of a server that `rackup -s narwhal` or `rails server
    # -u narwhal` starts: Narwhal's config file, found in the order below, and
    # the address the command line gave. docs/CONFIGURATION.md ("rackup and
    # rails server") is the user's side of this.
    class Rackup < Configurator
      ENV_NAME = "NARWHAL_CONFIG"
      DEFAULT_FILE = File.join("config", "narwhal.rb")
      DEFAULT_HOST = "127.0.0.1"
      DEFAULT_PORT = 8080

      # The config file and what named it, first found of: rackup's
      # `-O config_file=PATH`, NARWHAL_CONFIG, ./config/narwhal.rb (rails
      # server runs in the app's root). [nil, nil] for none.
      def self.find_file(options, env = ENV)
        if options[:config_file]
          [File.expand_path(options[:config_file]), "-O config_file"]
        elsif !env[ENV_NAME].to_s.empty?
          [File.expand_path(env[ENV_NAME]), ENV_NAME]
        elsif File.exist?(DEFAULT_FILE)
          [File.expand_path(DEFAULT_FILE), DEFAULT_FILE]
        end
      end

      attr_reader :notes

      # options: what rackup or rails server passes to the handler.
      def initialize(file:, rackup_options:)
        super(file: file)
        @rackup_options = rackup_options
        @notes = []
        keep_rackup_pid_file
      end

      def reload
        self.class.new(file: file, rackup_options: @rackup_options)
      end

      # The command line's address replaces the file's `listen` lines when it
      # gave one. rails server says which options were typed; rackup always
      # passes an address (9292 by default), so with rackup it always counts.
      def apply_command_line_address
        replaced = settings[:listeners].map(&:first)
        return unless replaced.empty? || command_line_address?

        settings[:listeners] = []
        add_listener(command_line_address)
        @notes << "listen #{replaced.join(', ')} of #{file} replaced by #{command_line_address} " \
                  "from the command line" if replaced.any?
      end

      private

      def command_line_address?
        typed = @rackup_options[:user_supplied_options]
        typed.nil? || typed.include?(:Host) || typed.include?(:Port)
      end

      def command_line_address
        host = @rackup_options[:Host] || DEFAULT_HOST
        host = "[#{host}]" if host.include?(":") && !host.start_with?("[")
        "#{host}:#{@rackup_options[:Port] || DEFAULT_PORT}"
      end

      # rackup's pid file (-P, or rails server's tmp/pids/server.pid) is
      # removed by an at_exit hook that forked workers inherit: a worker that
      # exits (TTOU, HUP) would delete its master's file. Write it back.
      def keep_rackup_pid_file
        path = @rackup_options[:pid]
        return unless path

        hook = settings[:after_worker_exit]
        settings[:after_worker_exit] = lambda do |server, worker, status|
          hook.call(server, worker, status)
          Master::PidFile.new(path).write unless File.exist?(path)
        end
      end
    end
  end
end
