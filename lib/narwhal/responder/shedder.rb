# frozen_string_literal: true

module Narwhal
  class Responder
    # Answers a request that waited past queue_deadline before the server
    # got to it, instead of the app: whoever sent it has likely given up
    # (or its proxy will time it out), so the app's work would be lost and
    # would make every request behind it later still. The answer is fast
    # and says when to come back: 503, Retry-After, Connection: close (the
    # client reconnects, and the kernel hands the new connection to
    # whichever worker is free).
    #
    # Each one is counted (the worker's REQUESTS_SHED_QUEUE counter, in
    # /metrics as narwhal_requests_shed_total{reason="queue_deadline"});
    # the log gets one line per LOG_INTERVAL at most, with how many were
    # shed since the last line, so that an overload does not flood it.
    class Shedder
      STATUS = 503
      LOG_INTERVAL = 1.0 # seconds

      # deadline: queue_deadline (seconds); retry_after: whole seconds.
      def initialize(logger, counters, deadline:, retry_after:)
        @logger = logger
        @counters = counters
        @deadline = deadline
        @bytes = ResponseWriter::ErrorResponse.bytes(STATUS, headers: { "retry-after" => retry_after.to_s }).freeze
        @head_bytes = ResponseWriter::ErrorResponse.bytes(STATUS, head: true,
                                                                  headers: { "retry-after" => retry_after.to_s }).freeze
        @unlogged = 0
        @logged_at = nil
      end

      # Whether a request that waited this long (seconds, nil: unknown) is shed.
      def late?(waited)
        !waited.nil? && waited > @deadline
      end

      # Sends the 503 to request's client; the connection closes after it.
      def answer(request, waited)
        @counters.count(Scoreboard::REQUESTS_SHED_QUEUE)
        note(request, waited)
        request.out.write(request.head? ? @head_bytes : @bytes)
        Next::CLOSE
      rescue ClientGone, IOError, SystemCallError
        Next::CLOSE # gone already: nothing to answer
      end

      private

      def note(request, waited)
        @unlogged += 1
        now = Clock.now
        return if @logged_at && now - @logged_at < LOG_INTERVAL

        env = request.env
        @logger.warn(format("shed %<count>d request(s) past queue_deadline %<deadline>gs with 503, the last " \
                            "%<method>s %<path>s after %<waited>.3fs", count: @unlogged, deadline: @deadline,
                                                                         method: env[REQUEST_METHOD], path: env[PATH_INFO],
                                                                         waited: waited))
        @unlogged = 0
        @logged_at = now
      end
    end
  end
end
