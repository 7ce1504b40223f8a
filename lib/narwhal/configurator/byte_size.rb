# frozen_string_literal: true

module Narwhal
  class Configurator
    # Sizes in bytes as operators write them in a config file, and as the
    # log shows them back.
    #
    # An Integer is bytes. A String is a number with a unit K, M or G (any
    # case, with or without "B" or "iB"): "512MB", "512M", "512Mi", "1.5G".
    # Units are binary (1024-based), as in nginx, Docker and the JVM:
    # Kubernetes' "512M" (decimal) reads here as 512 MiB, 5% more.
    module ByteSize
      UNITS = { "" => 1, "k" => 1024, "m" => 1024**2, "g" => 1024**3 }.freeze
      FORM = /\A\s*(\d+(?:\.\d+)?)\s*(?:([kmg])(?:i?b|i)?|b)?\s*\z/i

      module_function

      # Bytes as an Integer, or nil when value is neither an Integer nor a
      # String of that form.
      def parse(value)
        return value if value.is_a?(Integer)
        return nil unless value.is_a?(String) && (m = FORM.match(value))

        (Float(m[1]) * UNITS.fetch(m[2].to_s.downcase)).round
      end

      # 641728512 -> "612.0 MiB"
      def format(bytes)
        unit, size = UNITS.reverse_each.find { |_, s| bytes >= s } || ["", 1]
        return "#{bytes} B" if unit.empty?

        "#{Kernel.format('%.1f', bytes.fdiv(size))} #{unit.upcase}iB"
      end
    end
  end
end
