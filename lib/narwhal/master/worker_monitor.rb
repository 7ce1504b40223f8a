# frozen_string_literal: true

module Narwhal
  class Master
    # What the master enforces on its workers on every pass of its loop,
    # read from the scoreboard the workers write (no signal, pipe or system
    # call on the request path). Each policy says why a worker must go, or
    # nil, and with which signal; the monitor logs the reason and hands the
    # worker and signal back to the master, which sends it.
    #
    # `timeout` kills (KILL). `worker_memory_limit` (MemoryLimit) and
    # `worker_max_requests` (RequestLimit) retire (QUIT): the master hands
    # those workers to its Recycler, which replaces them before they go.
    # A policy answers signal, interval, due?(now) (whether to look on
    # this pass) and breach(worker, scoreboard).
    class WorkerMonitor
      autoload :MemoryLimit, "narwhal/master/worker_monitor/memory_limit"
      autoload :RequestLimit, "narwhal/master/worker_monitor/request_limit"
      autoload :StrandedRequests, "narwhal/master/worker_monitor/stranded_requests"
      autoload :Timeout, "narwhal/master/worker_monitor/timeout"
      autoload :TimeoutInfo, "narwhal/master/worker_monitor/timeout"
      # The policies a configuration asks for (built again on HUP). server:
      # the master (its tally, and what its hooks receive), nil in tests.
      def self.for(config, scoreboard, server = nil)
        policies = [Timeout.new(config[:timeout], config.logger)]
        if config[:worker_memory_limit]
          policies << MemoryLimit.new(config[:worker_memory_limit], pss: config[:worker_memory_pss],
                                                                    interval: config[:worker_memory_check_interval])
        end
        if config[:worker_max_requests]
          policies << RequestLimit.new(config[:worker_max_requests], config[:worker_max_requests_jitter])
        end
        stranded = StrandedRequests.new(scoreboard, config.logger, -> { server ? server.listeners.map { |l| l.io.fileno } : [] })
        new(scoreboard, policies, config.logger, server: server, on_timeout: config[:after_worker_timeout],
                                                 stranded: stranded)
      end

      # on_timeout: called as after_worker_timeout is, once a worker was
      # signalled for its timeout; stranded: StrandedRequests, which answers
      # the clients of a worker about to be killed for it (nil: none).
      def initialize(scoreboard, policies, logger, server: nil, on_timeout: nil, stranded: nil)
        @scoreboard = scoreboard
        @policies = policies
        @logger = logger
        @server = server
        @on_timeout = on_timeout
        @stranded = stranded
      end

      # The longest the master may sleep between two checks.
      def interval
        @policies.map(&:interval).min
      end

      # Yields each worker that must go with the signal to send and the
      # policy, once per worker: the first policy it breaches decides. A
      # worker already retiring is not retired again (but still killed
      # past its timeout). A killed worker is not judged again: passes
      # may see it before it is reaped, and its kill is logged, hooked and
      # counted once.
      def check(workers)
        policies = @policies.select { |policy| policy.due?(Clock.now) }
        workers.each do |worker|
          next if worker.killed

          policies.each do |policy|
            next if policy.signal == :QUIT && (worker.quitting || worker.recycling)

            reason = policy.breach(worker, @scoreboard)
            next unless reason

            @stranded&.answer(worker, reason) if reason.is_a?(TimeoutInfo)
            # a kill cuts requests; a recycle is routine
            level = policy.signal == :KILL ? :error : :warn
            @logger.public_send(level, "worker=#{worker.nr} pid=#{worker.pid} #{reason}")
            worker.killed = true if policy.signal == :KILL
            yield worker, policy.signal, policy
            timed_out(worker, reason) if reason.is_a?(TimeoutInfo)
            break
          end
        end
      end

      private

      # The kill is sent: counted for /metrics, then the operator's hook. A
      # hook that raises is logged; the master carries on.
      def timed_out(worker, info)
        @server&.tally&.count(:timeout_kills)
        @on_timeout&.call(@server, worker, info)
      rescue StandardError, ScriptError => e
        @logger.error("after_worker_timeout failed: #{ErrorMessage.for(e)}#{ErrorMessage.backtrace(e)}")
      end
    end
  end
end
