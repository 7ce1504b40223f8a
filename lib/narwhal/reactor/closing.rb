# frozen_string_literal: true

module Narwhal
  class Reactor
    # Closing handlers that no loop thread owns: past their deadline (the
    # sweep, every SWEEP_INTERVAL), to make room at the connection limit,
    # and on an immediate stop. With request threads a handler is claimed
    # first (Poller#claim): the thread that has it decides.
    module Closing
      # Closes the oldest idle connection that no thread has, else the
      # oldest silent one (never sent a byte); true if one was.
      def close_oldest_idle
        handlers = @handlers.keys # in the order they were accepted
        handlers.each { |h| return true if h.idle? && drop_unowned(h) { h.idle? } }
        handlers.each { |h| return true if h.silent? && drop_unowned(h) { h.silent? } }
        false
      end

      # Offers the block (keepalive_release) connections idle since before
      # (Connection#idle_since?) that no thread has, oldest first, until it
      # gave away at most; one it gave (true) is closed here: only this
      # process's descriptor, the socket lives on where it went. How many
      # it gave.
      def release_idle(before, at_most)
        given = 0
        @handlers.keys.each do |handler|
          break if given >= at_most
          next unless handler.idle_since?(before) && (fd = @handlers[handler])
          next if @threaded && !claim_if(handler, fd) { handler.idle_since?(before) }

          if yield(handler)
            apply(handler, fd, CLOSE)
            given += 1
          elsif @threaded
            wait_for(fd, false) # kept: armed again, as the claim found it
          end
        end
        given
      end

      # One could be closed to make room.
      def any_idle?
        @handlers.keys.any? { |h| (h.idle? || h.silent?) && !owned?(h) }
      end

      private

      def owned?(handler)
        @threaded && (fd = @handlers[handler]) && @poller.owned?(fd)
      end

      # Closes handler unless a thread has it, or (after the claim) the block
      # says no; true if it was closed.
      def drop_unowned(handler, &still)
        fd = @handlers[handler] or return false
        return false if @threaded && !claim_if(handler, fd, &(still || proc { true }))

        apply(handler, fd, CLOSE)
        true
      end

      # One thread at a time; the others go on serving.
      def sweep(now)
        return unless @sweeping.try_lock

        begin
          @next_sweep = now + SWEEP_INTERVAL
          @on_sweep&.call
          @acceptors.sweep(now)
          @handlers.keys.each { |h| time_out(h) if h.deadline < now }
        ensure
          @sweeping.unlock
        end
      end

      # A handler past its deadline, unless a thread has it (its thread decides).
      def time_out(handler)
        fd = @handlers[handler] or return
        return if @threaded && !claim_if(handler, fd) { handler.deadline < Clock.now }

        apply(handler, fd, timed_out(handler))
      end

      # Claims fd, then asks the block again: between the first look and the
      # claim its thread may have served it (a new deadline, a request begun).
      # If the answer changed the claim is given back, armed again: a report
      # dropped while it was claimed used the arming up.
      def claim_if(handler, fd)
        return false unless @poller.claim(fd)
        return true if yield

        wait_for(fd, @writing[fd] || false) if @handlers[handler] == fd
        false
      end

      def timed_out(handler)
        handler.on_timeout
      rescue StandardError => e
        internal_error(e)
        CLOSE
      end
    end
  end
end
