# frozen_string_literal: true

require "socket"

module Narwhal
  # The reading side of one client connection: reads bytes as they arrive,
  # parses them (HttpParser), stores the body (Request::Input), answers
  # `Expect: 100-continue`, and hands each complete request to the
  # dispatcher. Requests it will not serve get their 4xx here, then the
  # connection lingers (drains what the client still sends) and closes.
  # Nothing here waits for a client: a 4xx or 100 Continue the socket does
  # not take goes to the spool like any response (the 4xx is sent by the
  # reactor, then the connection lingers); one that cannot be spooled
  # closes the connection at once.
  #
  # It is a Reactor handler: #on_readable, #on_writable and #on_timeout
  # return what the reactor should do with it next (KEEP, WRITE, CLOSE,
  # RELEASE). It never blocks on reading, so a slow client holds no app
  # thread; a response its client does not read fast enough is finished by
  # the reactor from the connection's spool (WRITE, #on_writable).
  #
  # Its deadline: a total for the head (client_header_timeout, from the
  # request's first byte; from accept for a connection's first request),
  # progress for the body (client_body_timeout, moved by each read of body
  # bytes), keepalive_timeout between requests.
  class Connection
    autoload :Factory, "narwhal/connection/factory"
    autoload :PendingSend, "narwhal/connection/pending_send"

    READ_SIZE = RequestLoop::READ_SIZE # the C loop reads as much at a time
    EMPTY_BUFFER = "".b.freeze
    # After an error response we read and drop what the client still sends,
    # so that closing does not reset the connection before it reads our answer.
    LINGER_SECONDS = 2
    LINGER_MAX_BYTES = 1024 * 1024

    IDLE = 0 # waiting for the first byte of a request
    HEAD = 1 # reading the request line and header section
    BODY = 2 # reading the request body
    LINGER = 3 # error sent, draining before close
    SERVING = 4 # the request is with the dispatcher

    # The deadline while the app has the request: the master's `timeout`
    # and soft_timeout watch it, not the reactor.
    NO_DEADLINE = Float::INFINITY
    SEND = 5 # the response is complete; the reactor sends what is spooled

    CONTINUE = "HTTP/1.1 100 Continue\r\n\r\n"
    EMPTY_ENV = {}.freeze
    REQUEST_METHOD = Request::REQUEST_METHOD
    PATH_INFO = Request::PATH_INFO

    KEEP = Reactor::KEEP
    WRITE = Reactor::WRITE
    CLOSE = Reactor::CLOSE
    RELEASE = Reactor::RELEASE

    # What every connection of a serving process shares. keepalive turns
    # false on a graceful stop: responses then say Connection: close.
    # access_log: the AccessLog (nil: off), for the requests refused here.
    Context = Struct.new(:limits, :dispatcher, :logger, :counters, :keepalive, :access_log)

    attr_reader :deadline, :request

    def initialize(io, request, context)
      @io = io
      @fd = io.fileno
      @request = request
      @out = request.out
      @context = context
      @dispatcher = context.dispatcher
      limits = context.limits
      @keepalive_timeout = limits.keepalive_timeout
      @keepalive_requests = limits.keepalive_requests
      @header_timeout = limits.client_header_timeout
      @body_timeout = limits.client_body_timeout
      @parser = nil # made when a request is first read here, not by the RequestLoop
      @buf = EMPTY_BUFFER.dup # sized by its first read; String.new(capacity:) would cost a Hash
      @rbuf = nil # second read buffer, only once bytes are left over
      @off = 0
      @state = IDLE
      @requests = 0
      @rejected = false # an error response is being sent: linger after it
      @env = nil
      @input = nil
      @deadline = Clock.now + @header_timeout # the first request's head: from accept
    end

    # Between requests on a kept-alive connection, with nothing buffered: a
    # graceful stop may close it. A new connection is not idle: its first
    # request is on its way.
    def idle?
      @state == IDLE && @requests.positive? && @off >= @buf.bytesize
    end

    # Has not sent a byte since it was accepted: at the connection limit it
    # makes room after the idle kept-alive ones (closing it loses nothing
    # it sent, and keeping it would leave clients that send in the listen
    # queue).
    def silent?
      @state == IDLE && @requests.zero? && @buf.empty? && nothing_waiting?
    end

    # Reads what the socket has and hands on every complete request in it:
    # the dispatcher's RequestLoop (C) serves the common ones, the rest is
    # read and served here.
    def on_readable
      if @state == IDLE && @off >= @buf.bytesize && (request_loop = @dispatcher.request_loop)
        action = run_loop(request_loop)
        return action if action
      end
      # `while true`, not `loop do`: a block here would cost allocations on
      # every request (this is the hot path)
      while true # rubocop:disable Style/InfiniteLoop
        into = @off >= @buf.bytesize ? @buf : (@rbuf ||= EMPTY_BUFFER.dup)
        data = @io.read_nonblock(READ_SIZE, into, exception: false)
        return KEEP if data == :wait_readable
        return CLOSE if data.nil?

        n = data.bytesize
        if @state == LINGER
          return CLOSE if (@lingered += n) > LINGER_MAX_BYTES

          next
        end
        if into.equal?(@buf)
          @off = 0
        else
          @buf << @rbuf
        end
        action = process
        return action unless action == KEEP
        return KEEP if n < READ_SIZE
      end
    rescue IOError, SystemCallError
      CLOSE
    end

    # The RequestLoop accepted it and served its first requests (#accept_serve:
    # result, how many, and rest, the bytes read and not served, or nil):
    # what now becomes of it.
    def served_first(result, requests, rest)
      @buf = rest if rest
      # nil: read on (as #on_readable would); epoll reports what is there
      after_loop(result, requests, 0) || KEEP
    end

    # No request has been complete on it yet: a new connection whose first
    # request has not arrived (Dispatcher::AcceptGate counts it as claiming a thread).
    def awaiting_first_request?
      @requests.zero?
    end

    # The socket takes bytes again: sends what it takes of the spool; once
    # all went out, reads again, first the pipelined requests already read.
    def on_writable
      return CLOSE if (done = @send.continue).nil?

      @deadline = @send.deadline
      return WRITE unless done

      @state = IDLE
      return linger if @rejected
      return process if !@send.close_after && @off < @buf.bytesize
      # the head said keep-alive: the client may send the next request now,
      # even once stopping (it is answered with connection: close)
      return CLOSE if @send.close_after

      @deadline = Clock.now + @keepalive_timeout
      KEEP
    end

    # The deadline passed: 408 to a request being read, else just close.
    def on_timeout
      if @state == SEND
        @send.timed_out
      elsif @state == HEAD || @state == BODY
        reject(408) # what the socket takes now; the rest is dropped with the connection
      end
      CLOSE
    end

    # What becomes of the connection once the responder returned: KEEP it
    # for the next request, WRITE the rest of the response from the spool,
    # CLOSE it, or RELEASE it (hijacked). Only answers; the caller tells the
    # reactor.
    def after_response(outcome)
      hijacked = outcome == Responder::HIJACKED || @request.hijacked?
      return start_send(outcome) if !hijacked && @out.pending?

      finish_request
      return RELEASE if hijacked
      # KEEP: the head said keep-alive, so the connection stays even if a
      # graceful stop began since (with threads, while the app ran): its
      # client may send the next request at once
      return CLOSE unless outcome == Responder::KEEP

      @deadline = Clock.now + @keepalive_timeout
      KEEP
    end

    def close
      @out.discard_spool
      @input&.close
      @input = nil
      @io.close unless @request.hijacked? || @io.closed?
    rescue IOError, SystemCallError
      nil
    end

    private

    # Nothing in the socket either (a connection taken by a drain, or one
    # waiting for a busy thread, may have its request there unread).
    def nothing_waiting?
      @io.recv_nonblock(1, Socket::MSG_PEEK, exception: false) == :wait_readable
    rescue IOError, SystemCallError
      false
    end

    # The RequestLoop reads and serves while the requests are common; nil
    # when it left bytes for #process and the reading loop.
    def run_loop(request_loop)
      @state = SERVING # not idle to a graceful stop, nor silent
      before = @requests
      result = request_loop.serve(@fd, @buf, @request, @context, before, @keepalive_requests)
      after_loop(result, request_loop.requests, before)
    end

    # What the RequestLoop's #serve (or #accept_serve) returned, as an
    # action; nil: Ruby parsed what the loop left and waits for more.
    def after_loop(result, requests, before)
      @requests = requests
      @off = 0 # what the loop left (if anything) is all of @buf
      @state = IDLE
      if result == true
        # nothing read at all: the deadline it had stands (a new
        # connection's first request is timed from accept)
        @deadline = Clock.now + @keepalive_timeout if @requests > before
        KEEP
      elsif result == false
        CLOSE
      elsif result
        # the Responder finished the last request; requests read after it
        # are served here, what is still unread when epoll reports it
        @env = @request.env # what the rest of its response is sent for
        action = after_response(result)
        action == KEEP && @off < @buf.bytesize ? process : action
      elsif (action = process) != KEEP
        action
      end
    end

    def new_parser
      limits = @context.limits
      HttpParser.new.configure(limits.max_request_line, limits.max_header_size,
                               limits.max_header_fields, limits.max_body_size)
    end

    # Parses what is buffered; hands on each complete request.
    def process
      @parser ||= new_parser
      while true # rubocop:disable Style/InfiniteLoop
        if @state == IDLE
          @state = HEAD
          @env = @request.start
          @idle_deadline = @deadline
          @deadline = Clock.now + @header_timeout if @requests > 0 # rubocop:disable Style/NumericPredicate
        end
        if @state == HEAD
          @off = @parser.execute(@env, @buf, @off)
          unless @parser.head_done?
            # only empty lines so far (allowed before a request line, sent by
            # some clients after a body): the connection is still idle
            if @off >= @buf.bytesize && !@env.key?(REQUEST_METHOD)
              @state = IDLE
              @deadline = @idle_deadline
            end
            return KEEP
          end

          return CLOSE unless start_body
        end
        if @state == BODY && !read_body
          @deadline = Clock.now + @body_timeout # body bytes came (or the head ended): progress
          return KEEP
        end

        discard_consumed
        action = serve
        return action unless action == KEEP && @off < @buf.bytesize
      end
    rescue HttpParserError => e
      reject(e.status)
    rescue Request::Input::StorageError => e
      refuse_body(e)
    end

    # False when a 100 Continue could be neither sent nor spooled: close.
    def start_body
      length = @parser.content_length
      if @parser.chunked? || (length && length.positive?)
        @state = BODY
        @input = Request::Input.new(@context.limits.body_buffer_size, @parser.chunked? ? nil : length)
        return @out.write_or_spool(CONTINUE) if @parser.expect_continue? && @parser.http11? && @off >= @buf.bytesize
      else
        @state = IDLE
      end
      true
    rescue ClientGone
      false
    end

    # Moves buffered body bytes into @input; true when the body is complete.
    def read_body
      @off = @input.take(@parser, @env, @buf, @off)
      if @input.complete?
        @state = IDLE
        return true
      end
      # a read ending inside a chunk-size line leaves it unconsumed; drop
      # the decoded bytes before it, or @buf would grow with the body
      discard_consumed
      false
    end

    # Drops consumed bytes so that the next request starts at offset 0.
    def discard_consumed
      return if @off.zero?

      if @off >= @buf.bytesize
        @off = @buf.bytesize
      else
        @buf[0, @off] = "" # in place (@buf is binary: indices are bytes)
        @off = 0
      end
    end

    # The request is complete: the dispatcher runs it; then the connection
    # waits for the next one, sends the rest of the response, closes, or
    # leaves the reactor (hijacked).
    def serve
      @requests += 1
      keepalive = @parser.keepalive? && @requests < @keepalive_requests && @context.keepalive
      @request.complete(@input, @parser.http11?, keepalive, @parser.queue_stamp?)
      @state = SERVING
      @deadline = NO_DEADLINE
      after_response(@dispatcher.dispatch(@request, self))
    end

    # The app returned, part of its response is spooled: the reactor sends
    # it (#on_writable).
    def start_send(outcome)
      @send ||= PendingSend.new(@out, @context.limits.write_timeout, @context.logger)
      @send.start(@env || EMPTY_ENV, outcome != Responder::KEEP)
      finish_request
      @state = SEND
      @deadline = @send.deadline
      WRITE
    end

    def finish_request
      @request.finish
      @parser&.reset
      @input&.close
      @input = nil
      @env = nil
      @state = IDLE
    end

    # Answers a request we will not serve, then drains and closes: at once
    # when the socket took the answer, else once the reactor sent it from
    # the spool (#on_writable).
    def reject(status)
      @context.counters.count(Scoreboard::REQUESTS_REJECTED)
      return CLOSE unless send_error(status)
      return linger unless @out.pending?

      @rejected = true
      start_send(Responder::CLOSE)
    end

    # The answer is sent: no more bytes from us; what the client still
    # sends is read and dropped until it closes or LINGER_SECONDS pass.
    def linger
      @io.shutdown(Socket::SHUT_WR)
      @state = LINGER
      @lingered = 0
      @deadline = Clock.now + LINGER_SECONDS
      KEEP
    rescue IOError, SystemCallError
      CLOSE
    end

    # No room for the body (or no temporary file): free what was stored,
    # log the cause once and answer like any request we cannot serve.
    def refuse_body(error)
      @input.close
      @input = nil
      @context.logger.error("request body of #{@env[REQUEST_METHOD]} #{@env[PATH_INFO]} not stored: " \
                            "#{error.message}; answered #{error.status}, closing")
      reject(error.status)
    end

    # Sent or spooled, never waited for; false when neither (close at
    # once). Logged as far as the request was read (no duration, no queue
    # time).
    def send_error(status)
      head = @request.head?
      @context.access_log&.refused(@env || EMPTY_ENV, status, ResponseWriter::ErrorResponse.body_bytesize(status, head: head))
      @out.write_or_spool(ResponseWriter::ErrorResponse.bytes(status, head: head))
    rescue IOError, SystemCallError
      false
    end
  end
end
