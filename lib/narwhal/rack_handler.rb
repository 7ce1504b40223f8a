# frozen_string_literal: true

require "narwhal"

module Narwhal
  # The handler behind `rackup -s narwhal` and `rails server -u narwhal`.
  module RackHandler
    DEFAULT_HOST = "127.0.0.1"
    DEFAULT_PORT = 8080

    def self.run(app, **options)
      # options[:config] is rackup's own config.ru, not ours
      config = Configurator.new(file: ENV["NARWHAL_CONFIG"])
      host = options[:Host] || DEFAULT_HOST
      host = "[#{host}]" if host.include?(":") && !host.start_with?("[")
      config.add_listener("#{host}:#{options[:Port] || DEFAULT_PORT}")
      server = Server.new(app, config)
      yield server if block_given?
      server.run
    end

    def self.valid_options
      {
        "Host=HOST" => "Hostname to listen on (default: #{DEFAULT_HOST})",
        "Port=PORT" => "Port to listen on (default: #{DEFAULT_PORT})"
      }
    end
  end
end
