# frozen_string_literal: true

module Narwhal
  class Connection
    # Makes the connections of one listener. Given a socket accepted in
    # Ruby, #call makes its Connection, with its Request (the env starts
    # from the listener's defaults) and SocketWriter.
    #
    # #accept_served takes the accept itself, where the thread has a
    # RequestLoop: the loop accepts the connection and serves its first
    # requests at once, and a Connection is made only for one that stays
    # (kept alive, or left to Ruby: a body, a streamed response, a hijack).
    # A connection that closes after them (HTTP/1.0, Connection: close)
    # costs no object of its own: it was served with this thread's spare
    # Request, whose writer was given the descriptor and never needed an
    # IO, and that Request serves the next connection.
    class Factory
      # What #accept_served returns on a thread without a RequestLoop (the
      # access log, soft_timeout): the caller accepts in Ruby (#call).
      UNSERVED = :unserved

      # budget: the worker's SocketWriter::SpoolBudget (nil: never spool); threaded: request
      # threads (Request::Threaded); counting: the access log counts bytes sent; origin: the
      # listener's index among those siblings share (Dispatcher::HandOff#origin), or nil.
      def initialize(listener, template, context, counters, budget:, early_hints:, threaded:, counting:, origin: nil)
        @listener = listener
        @origin = origin
        @template = template
        @context = context
        @counters = counters
        @early_hints = early_hints
        @request_class = threaded ? Request::Threaded : Request
        @writer_class = counting ? SocketWriter::Counting : SocketWriter
        @write_timeout = context.limits.write_timeout
        @budget = budget
        @spares = {}.compare_by_identity # RequestLoop => its Request for the next connection
      end

      def call(sock)
        @counters.count(Scoreboard::CONNECTIONS_ACCEPTED)
        connection(sock)
      end

      # A kept-alive connection a sibling worker handed over
      # (Dispatcher::HandOff::Inbox), after requests on it.
      def adopt(sock, requests)
        connection(sock).handed_over(requests)
      end

      # nil: no connection was waiting; false: one was served and closed;
      # [connection, fd, action]: one the reactor now holds, with what to
      # do with it next (Reactor's KEEP, WRITE, CLOSE, RELEASE); UNSERVED.
      # Raises what accept(2) raises (IOError once the listener is closed).
      def accept_served
        request_loop = @context.dispatcher.request_loop or return UNSERVED
        request = @spares.delete(request_loop) || spare_request
        got = request_loop.accept_serve(@listener.io.fileno, request, @context)
        unless got
          @spares[request_loop] = request
          @counters.count(Scoreboard::CONNECTIONS_ACCEPTED) if got == false
          return got
        end
        @counters.count(Scoreboard::CONNECTIONS_ACCEPTED)
        held(request, request_loop, *got)
      end

      private

      def connection(sock)
        out = @writer_class.new(sock, @write_timeout, @budget)
        request = @request_class.new(@template, out, @listener.remote_addr(sock), @early_hints, @context)
        Connection.new(sock, request, @context, @origin)
      end

      def held(request, request_loop, fd, result, rest)
        connection = Connection.new(request.out.io, request, @context, @origin)
        [connection, fd, connection.served_first(result, request_loop.requests, rest, request_loop.arrived)]
      rescue StandardError
        request.out.io.close # a bug costs this connection, not its descriptor
        raise
      end

      # Its writer has no socket until the loop gives it one; its
      # REMOTE_ADDR is set by the loop for each TCP connection.
      def spare_request
        out = @writer_class.new(nil, @write_timeout, @budget, @listener.socket_class)
        remote_addr = @listener.unix? ? Listener::UNIX_REMOTE_ADDR : nil
        @request_class.new(@template, out, remote_addr, @early_hints, @context)
      end
    end
  end
end
