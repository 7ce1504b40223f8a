# frozen_string_literal: true

module Narwhal
  # WEB_CONCURRENCY, the worker count that Heroku and generated Rails
  # configs read, is the default of `worker_processes`: a config file that
  # sets worker_processes wins over it.
  module WebConcurrency
    NAME = "WEB_CONCURRENCY"

    # The count it asks for, nil when unset or empty.
    def self.worker_processes(env = ENV)
      value = env[NAME].to_s
      return nil if value.strip.empty?

      count = Integer(value, 10, exception: false)
      raise ConfigError, "#{NAME}=#{value.inspect} is not a worker count (a whole number >= 1)" unless count&.positive?

      count
    end
  end
end
