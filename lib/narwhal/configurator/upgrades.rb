# frozen_string_literal: true

module Narwhal
  class Configurator
    # The directives that make a USR2 upgrade safe to start without a
    # human watching it (Master::Upgrade does it): upgrade_timeout,
    # upgrade_health_path and upgrade_retire_old. They are read by the
    # master that gets USR2, so the running configuration governs the
    # upgrade it starts and a broken new release cannot loosen them. Part
    # of the DSL; its checks raise with the config file's line like every
    # other directive.
    module Upgrades
      # upgrade_timeout SECONDS: after USR2 the new master must have all its
      # workers ready within this time, or it gives up and the old master
      # serves on; nil (the default) waits as long as it takes.
      def upgrade_timeout(seconds)
        seconds = Numbers.seconds(seconds)
        check(seconds.nil? || (seconds.is_a?(Numeric) && seconds.positive?),
              "upgrade_timeout expects a number of seconds > 0 (or nil: off), got #{seconds.inspect}")
        @config.settings[:upgrade_timeout] = seconds
      end

      # upgrade_health_path "/up", headers: { "Host" => "example.com" }:
      # each new worker must get 200 from its app for GET PATH before it
      # serves; nil turns it off.
      def upgrade_health_path(path, options = {})
        check(path.nil? || (path.is_a?(String) && path.match?(%r{\A/[[:graph:]]*\z})),
              "upgrade_health_path expects a path starting with / and without spaces (or nil: off), " \
              "got #{path.inspect}")
        check(options.is_a?(Hash) && (options.keys - %i[headers]).empty?,
              "upgrade_health_path's one option is headers:, got #{options.inspect}")
        headers = options.fetch(:headers, {})
        check(headers.is_a?(Hash) && headers.all? { |name, value| header?(name, value) },
              "upgrade_health_path headers: expects { \"Name\" => \"value\" } Strings without line breaks, " \
              "got #{headers.inspect}")
        @config.settings.update(upgrade_health_path: path, upgrade_health_headers: headers.to_h { |k, v| [k.to_s, v] })
      end

      # upgrade_retire_old BOOL: once the new master serves with all its
      # workers, the old master retires its own, one at a time, and exits.
      def upgrade_retire_old(value)
        check([true, false].include?(value), "upgrade_retire_old expects true or false, got #{value.inspect}")
        @config.settings[:upgrade_retire_old] = value
      end

      private

      def header?(name, value)
        (name.is_a?(String) || name.is_a?(Symbol)) && name.to_s.match?(/\A[!#$%&'*+.^_`|~0-9A-Za-z-]+\z/) &&
          value.is_a?(String) && !value.match?(/[\r\n\x00]/)
      end
    end
  end
end
