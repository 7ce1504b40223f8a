# frozen_string_literal: true

module Narwhal
  class Master
    module Upgrade
      # The new master USR2 started, as the old master follows it: what it
      # said on the channel (serving, ready, failed).
      class Successor
        attr_reader :pid

        def initialize(pid, channel, logger)
          @pid = pid
          @channel = channel
          @logger = logger
          @said = nil # :serving, :ready, :failed
        end

        def reader
          @channel.reader
        end

        # Its workers serve, some or all: the service is ready whoever answers.
        def serving?
          %i[serving ready].include?(@said)
        end

        def ready?
          @said == :ready
        end

        # On each pass of the old master's loop: what it said since, as
        # [:serving], [:ready] or [:failed, reason].
        def events
          @channel.messages.filter_map { |kind, text| hear(kind, text) }
        end

        def close
          @channel.close
        end

        private

        def hear(kind, text)
          case kind
          when "serving" then @said ||= :serving
          when "ready" then @said = :ready
          when "failed" then @said = :failed
          else return nil # a line of a later version
          end
          kind == "failed" ? [:failed, text] : [kind.to_sym]
        end
      end
    end
  end
end
