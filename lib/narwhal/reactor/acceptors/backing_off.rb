# frozen_string_literal: true

module Narwhal
  class Reactor
    class Acceptors
      # accept(2) failing for want of a shared resource (descriptors, kernel
      # memory): every listener leaves the epoll set for a pause that
      # AcceptBackoff sets, and comes back when it is over.
      module BackingOff
        # accept(2) failed for want of a shared resource: every listener
        # leaves the epoll set until the pause is over.
        def back_off(error)
          @lock.synchronize do
            now = Clock.now
            @resume_at = now + @backoff.failed(error, now)
            update
          end
        end

        private

        def recovered
          @lock.synchronize { @backoff.recovered(Clock.now) if @backoff.failing? }
        end

        def back_off_over(now)
          @lock.synchronize do
            next unless @resume_at && now >= @resume_at

            @resume_at = nil
            update
          end
        end
      end
    end
  end
end
