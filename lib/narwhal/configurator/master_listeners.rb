# frozen_string_literal: true

module Narwhal
  class Configurator
    # The addresses the master answers on itself, never the app (Master::
    # Control): control_listen (HTTP: /metrics, /health, /ready, /status)
    # and agent_listen (haproxy's agent-check). Part of the DSL; an address
    # is read as `listen` reads it, and its problem raised with the config
    # file's line like every other directive's.
    module MasterListeners
      # The master's control listener: an address, nil for none.
      def control_listen(address)
        @config.settings[:control_listen] = master_address(:control_listen, address)
      end

      # haproxy's agent-check responder (`agent-check agent-port N`): an
      # address, nil for none.
      def agent_listen(address)
        @config.settings[:agent_listen] = master_address(:agent_listen, address)
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
