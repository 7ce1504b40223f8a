# frozen_string_literal: true

module Narwhal
  class Connection
    # The end of a response whose app has returned but whose client has not
    # taken it yet: the reactor sends it from the connection's spool
    # (SocketWriter) whenever the socket is writable, under write_timeout as
    # a progress timeout (each byte taken restarts it). One per connection,
    # made the first time a response outlasts its app call.
    class PendingSend
      REQUEST_METHOD = Request::REQUEST_METHOD
      PATH_INFO = Request::PATH_INFO

      # deadline: a Clock time; close_after: the connection closes once sent
      attr_reader :deadline, :close_after

      def initialize(out, write_timeout, logger)
        @out = out
        @write_timeout = write_timeout
        @logger = logger
      end

      # The app returned for env's request with bytes still spooled.
      def start(env, close_after)
        @request = "#{env[REQUEST_METHOD]} #{env[PATH_INFO]}" # for the log, once env is gone
        @close_after = close_after
        @deadline = Clock.now + @write_timeout
      end

      # Sends what the socket takes now: true once all is sent, false while
      # more is to come, nil when the response cannot be completed.
      def continue
        @deadline = Clock.now + @write_timeout if @out.flush_nonblock.positive?
        !@out.pending?
      rescue SocketWriter::Spool::ShortFile => e
        @logger.error("#{e.message} (#{@request}); closing connection")
        nil
      rescue ClientGone
        nil
      end

      def timed_out
        @logger.warn("write timeout: client took no data for #{@write_timeout}s, closing (#{@request})")
      end
    end
  end
end
