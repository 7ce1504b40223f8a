# frozen_string_literal: true

module Narwhal
  class Configurator
    # The directives about requests that waited before the server got to
    # them: queue_deadline sheds them (Responder::Shedder answers them),
    # keepalive_rebalance lets go of the kept-alive connection they waited
    # on (Request#complete), keepalive_release hands a saturated worker's
    # idle ones to a sibling (Dispatcher::HandOff::Release). Part of the
    # DSL; their checks raise with the config file's line like every other
    # directive's.
    module Queueing
      # queue_deadline SECONDS, retry_after: 1. A request whose queue time
      # (Responder::QueueTime) is past SECONDS when the server starts on it
      # gets 503 with Retry-After instead of the app; nil turns it off.
      def queue_deadline(seconds, options = {})
        seconds = Numbers.seconds(seconds)
        check(seconds.nil? || (seconds.is_a?(Numeric) && seconds.positive?),
              "queue_deadline expects a number of seconds > 0 (or nil: off), got #{seconds.inspect}")
        check(options.is_a?(Hash) && (options.keys - %i[retry_after]).empty?,
              "queue_deadline's one option is retry_after:, got #{options.inspect}")
        retry_after = Numbers.integer(options.fetch(:retry_after, DEFAULTS[:queue_deadline_retry_after]))
        check(retry_after.is_a?(Integer) && retry_after >= 0,
              "queue_deadline retry_after: expects whole seconds >= 0, got #{retry_after.inspect}")
        @config.settings.update(queue_deadline: seconds&.to_f, queue_deadline_retry_after: retry_after)
      end

      # keepalive_rebalance SECONDS: a request on a kept-alive connection
      # that waited longer for its worker gets Connection: close; nil or
      # false turns it off.
      def keepalive_rebalance(seconds)
        seconds = nil if seconds == false
        seconds = Numbers.seconds(seconds)
        check(seconds.nil? || (seconds.is_a?(Numeric) && seconds >= 0),
              "keepalive_rebalance expects a number of seconds >= 0 (or nil: off), got #{seconds.inspect}")
        @config.settings[:keepalive_rebalance] = seconds&.to_f
      end

      # keepalive_release SECONDS: a saturated worker hands its kept-alive
      # connections idle this long to a sibling with an idle thread
      # (Dispatcher::HandOff::Release); nil or false turns it off.
      def keepalive_release(seconds)
        seconds = nil if seconds == false
        seconds = Numbers.seconds(seconds)
        check(seconds.nil? || (seconds.is_a?(Numeric) && seconds >= 0),
              "keepalive_release expects a number of seconds >= 0 (or nil: off), got #{seconds.inspect}")
        @config.settings[:keepalive_release] = seconds&.to_f
      end
    end
  end
end
