# frozen_string_literal: true

module Narwhal
  class Configurator
    # The addresses the master answers on itself, never the app (Master::
    # Control): control_listen (HTTP: /metrics, /health, /ready, /status).
    # Part of the DSL; an address is read as `listen` reads it, and its
    # problem raised with the config file's line like every other
    # directive's.
    module MasterListeners
      # The master's control listener: an address, nil for none.
      def control_listen(address)
        @config.settings[:control_listen] = master_address(:control_listen, address)
      end

      private

      def master_address(directive, address)
        check(address.nil? || address.is_a?(String) || address.is_a?(Integer),
              "#{directive} expects an address String (or nil: none), got #{address.inspect}")
        begin
          Listener.parse(address) if address
        rescue ArgumentError => e
          fail_at("#{directive}: #{e.message}")
        end
        address&.to_s
      end
    end
  end
end
