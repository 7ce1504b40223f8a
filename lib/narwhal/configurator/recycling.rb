# frozen_string_literal: true

module Narwhal
  class Configurator
    # The directives that make the master replace workers before they grow
    # too big or too old (Master::Recycler does it): worker_memory_limit and
    # worker_max_requests. Part of the DSL; its checks raise with the config
    # file's line like every other directive.
    module Recycling
      MIN_MEMORY_LIMIT = 1024 * 1024 # below this no Ruby process fits
      MIN_CHECK_INTERVAL = 0.1 # seconds; reading PSS walks page tables

      # worker_memory_limit BYTES, pss: false, interval: 5. BYTES is an
      # Integer or a String such as "512MB" (ByteSize); nil turns it off.
      def worker_memory_limit(bytes, options = {})
        limit = ByteSize.parse(bytes)
        check(bytes.nil? || (limit && limit >= MIN_MEMORY_LIMIT),
              "worker_memory_limit expects bytes >= #{MIN_MEMORY_LIMIT} (an Integer or a size like \"512MB\"; " \
              "nil: off), got #{bytes.inspect}")
        check(options.is_a?(Hash) && (options.keys - %i[pss interval]).empty?,
              "worker_memory_limit's options are pss: and interval:, got #{options.inspect}")
        pss = options.fetch(:pss, false)
        check([true, false].include?(pss), "worker_memory_limit pss: expects true or false, got #{pss.inspect}")
        interval = Numbers.seconds(options.fetch(:interval, DEFAULTS[:worker_memory_check_interval]))
        check(interval.is_a?(Numeric) && interval >= MIN_CHECK_INTERVAL,
              "worker_memory_limit interval: expects seconds >= #{MIN_CHECK_INTERVAL}, got #{interval.inspect}")
        @config.settings.update(worker_memory_limit: limit, worker_memory_pss: pss,
                                worker_memory_check_interval: interval)
      end

      # worker_max_requests N, jitter: N / 10. Each worker's own limit is N
      # plus a random whole number from 0 to jitter, so that workers
      # started together do not all retire together. nil turns it off.
      def worker_max_requests(count, options = {})
        count = Numbers.integer(count)
        check(count.nil? || (count.is_a?(Integer) && count >= 1),
              "worker_max_requests expects an Integer >= 1 (nil: off), got #{count.inspect}")
        check(options.is_a?(Hash) && (options.keys - %i[jitter]).empty?,
              "worker_max_requests's one option is jitter:, got #{options.inspect}")
        jitter = Numbers.integer(options.fetch(:jitter, count.to_i / 10))
        check(jitter.is_a?(Integer) && jitter >= 0,
              "worker_max_requests jitter: expects an Integer >= 0, got #{jitter.inspect}")
        @config.settings.update(worker_max_requests: count, worker_max_requests_jitter: jitter)
      end
    end
  end
end
