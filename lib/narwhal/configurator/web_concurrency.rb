# frozen_string_literal: true

module Narwhal
  class Configurator
    # WEB_CONCURRENCY, the worker count that Heroku and generated Rails
    # configs read, is the default of `worker_processes`: a config file that
    # sets worker_processes wins over it. WEB_CONCURRENCY=auto is
    # `worker_processes :auto`.
    module WebConcurrency
      NAME = "WEB_CONCURRENCY"

      # The count it asks for (or :auto), nil when unset or empty.
      def self.worker_processes(env = ENV)
        value = env[NAME].to_s
        return nil if value.strip.empty?
        return :auto if value.strip == "auto"

        count = Integer(value, 10, exception: false)
        unless count&.positive?
          raise ConfigError, "#{NAME}=#{value.inspect} is not a worker count (a whole number >= 1, or auto)"
        end

        count
      end
    end
  end
end
