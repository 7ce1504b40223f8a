# frozen_string_literal: true

require "narwhal"

module Narwhal
  # The handler behind `rackup -s narwhal` and `rails server -u narwhal`,
  # extended into Rackup::Handler::Narwhal and Rack::Handler::Narwhal (their
  # names are what Rails prints: "=> Booting Narwhal").
  #
  # It runs Narwhal's master with the app rackup has already built: workers
  # are forked from it (as with preload_app true), so worker_processes,
  # timeout, the hooks and the signals of the config file all apply.
  module RackHandler
    # What the master asks for the app: the one rackup built, with rackup's
    # own middleware already around it.
    PrebuiltApp = Struct.new(:app) do
      def call
        app
      end

      def default_middleware=(_enabled); end
    end

    def run(app, **options)
      config = configure(options)
      # USR2 would run rackup's or rails' command line again, which neither
      # keeps (they consume their arguments): the new master could not start
      master = Master.new(config, PrebuiltApp.new(app), reexec: false)
      yield master if block_given?
      master.start
      master.join
    rescue ConfigError, Listener::Error, BootError => e
      abort(e.message.gsub(/^/, "narwhal: ")) # a config error has a line per problem
    rescue SystemCallError, ArgumentError => e
      abort("narwhal: #{ErrorMessage.for(e)}")
    end

    def valid_options
      {
        "config_file=PATH" => "Narwhal config file (default: $#{Configurator::Rackup::ENV_NAME}, " \
                              "else #{Configurator::Rackup::DEFAULT_FILE} when present)",
        "Host=HOST" => "Hostname to listen on (default: #{Configurator::Rackup::DEFAULT_HOST})",
        "Port=PORT" => "Port to listen on (default: #{Configurator::Rackup::DEFAULT_PORT})"
      }
    end

    private

    def configure(options)
      file, named_by = Configurator::Rackup.find_file(options)
      config = Configurator::Rackup.new(file: file, rackup_options: options)
      config.apply_command_line_address
      log = config.logger
      if file
        log.info("config_file=#{file} (from #{named_by})")
      else
        log.info("no config file (-O config_file, #{Configurator::Rackup::ENV_NAME} or " \
                 "#{File.expand_path(Configurator::Rackup::DEFAULT_FILE)}): narwhal's defaults")
      end
      config.notes.each { |note| log.info(note) }
      log.info("app loaded by #{File.basename($PROGRAM_NAME)} before forking: " \
               "workers share it, as with preload_app true")
      config
    end
  end
end
