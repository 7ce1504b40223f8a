# frozen_string_literal: true

module Narwhal
  class Server
    # How a serving process stops: gracefully (QUIT, a retirement after a
    # soft timeout, the master gone), draining the listen queue when no other
    # process will, and telling kept-alive clients to close only once no
    # process can take their reconnect into a queue it is about to drop.
    module Stopping
      private

      # After a soft timeout: the master forks a replacement and sends QUIT
      # once it serves (Master::Recycler), so that the port never lacks a
      # process that accepts. The master could not be told: stop accepting.
      def retire
        return if @retire_asked

        @retire_asked = true
        if @retire&.call
          @logger.info("retiring after a soft timeout: serving on until a replacement is ready")
        else
          graceful_stop("retiring after a soft timeout: finishing requests in progress, then exiting to be replaced")
        end
      end

      def quick_exit
        @access_log&.flush_at_exit
        exit!(0)
      end

      # drain: serve the listen queue first, when no other process will.
      # Kept-alive clients are then told to close only once no process can
      # take their reconnect into a queue it is about to drop (ours and our
      # siblings' listeners are all let go of): until then responses keep
      # them, and once they are gone a reconnect is refused and loses nothing.
      def graceful_stop(message, drain: last_to_listen?)
        return if @stopping # the master repeats QUIT until we are gone

        @stopping = true
        @counters.accepting = false # siblings stop leaving connections to us
        @counters.stopping! # nor count on us to share a crowd
        @logger.info(message)
        return stop_keeping_alive unless drain && !@listeners.empty?

        left = @listeners.size
        @reactor.retire(drain: true) do |listener|
          next if listener.equal?(@inbox) # taken from like a listener; the line is the master's

          # a worker's listeners stay the master's (its socket files too)
          listener.close(unlink: @standalone)
          let_go if (left -= 1).zero?
        end
      end

      def let_go
        @counters.let_go!
        @let_go = true
        @logger.info("listen queue taken, listeners let go of")
        stop_keeping_alive unless @scoreboard.siblings_listening?(@slot)
      end

      # At every sweep: once let go, the siblings' listeners are awaited.
      def on_sweep
        @access_log&.flush
        release_idle if @release
        stop_keeping_alive if @let_go && !@context.stopping && !@scoreboard.siblings_listening?(@slot)
      end

      def stop_keeping_alive
        @context.stopping = true
        @reactor.retire unless @let_go # no more accepting (a drain stopped it already)
      end

      # Standalone, or a worker whose master let go of the listeners: only
      # this process and its siblings still hold them.
      def last_to_listen?
        @standalone || (!@let_go_pipe.nil? && @let_go_pipe.read_nonblock(1, exception: false).nil?)
      rescue IOError, SystemCallError
        false
      end

      # The pipe's write end lives only in the master: EOF means it died.
      def master_gone
        @reactor.unwatch(@master_pipe)
        graceful_stop("master is gone: finishing requests in progress, then exiting", drain: true)
        # no master is left to enforce `timeout`: do it here
        limit = @config[:timeout]
        Thread.new do
          sleep(limit)
          @access_log&.flush_at_exit
          exit!(1)
        end
      end
    end
  end
end
