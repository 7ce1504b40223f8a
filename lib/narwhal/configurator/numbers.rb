# frozen_string_literal: true

module Narwhal
  class Configurator
    # Numbers written as Strings: what `ENV.fetch("RAILS_MAX_THREADS", 3)`
    # gives once the variable is set. A whole decimal number ("5", " 5 ",
    # "-1") is read where an Integer is expected, a decimal ("2.5") where
    # seconds are; anything else is handed back as it came, so that the
    # directive's own check refuses it with the value the file gave.
    module Numbers
      INTEGER = /\A\s*[-+]?\d+\s*\z/
      DECIMAL = /\A\s*[-+]?\d+(?:\.\d+)?\s*\z/

      module_function

      def integer(value)
        value.is_a?(String) && INTEGER.match?(value) ? Integer(value, 10) : value
      end

      def seconds(value)
        return value unless value.is_a?(String) && DECIMAL.match?(value)

        INTEGER.match?(value) ? Integer(value, 10) : Float(value)
      end
    end
  end
end
