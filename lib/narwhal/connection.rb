# frozen_string_literal: true

require "socket"

module Narwhal
  # The reading side of one client connection: reads bytes as they arrive,
  # parses them (HttpParser), stores the body (Request::Input), answers
  # `Expect: 100-continue`, and hands each complete request to the
  # dispatcher. Nothing here waits for a client: a 4xx or 100 Continue the
  # socket does not take goes to the spool like any response; one that
  # cannot be spooled closes the connection at once.
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
  #
  # Its phases besides reading are parts of their own, mixed in: Body,
  # Rejection (4xx and linger), WriteBehind (the spool's end), LoopResults
  # (what the C loop left it to do), Idleness (may it be closed for room),
  # HandingOff (moving to a sibling worker).
  class Connection
    autoload :Body, "narwhal/connection/body"
    autoload :Context, "narwhal/connection/context"
    autoload :Factory, "narwhal/connection/factory"
    autoload :HandingOff, "narwhal/connection/handing_off"
    autoload :Idleness, "narwhal/connection/idleness"
    autoload :LoopResults, "narwhal/connection/loop_results"
    autoload :PendingSend, "narwhal/connection/pending_send"
    autoload :Rejection, "narwhal/connection/rejection"
    autoload :WriteBehind, "narwhal/connection/write_behind"

    READ_SIZE = RequestLoop::READ_SIZE # the C loop reads as much at a time
    EMPTY_BUFFER = "".b.freeze
    IDLE = 0 # waiting for the first byte of a request
    HEAD = 1 # reading the request line and header section
    BODY = 2 # reading the request body
    LINGER = 3 # error sent, draining before close
    SERVING = 4 # the request is with the dispatcher
    SEND = 5 # the response is complete; the reactor sends what is spooled

    # While the app has the request `timeout` and soft_timeout watch it, not the reactor.
    NO_DEADLINE = Float::INFINITY
    EMPTY_ENV = {}.freeze
    REQUEST_METHOD = Request::REQUEST_METHOD
    PATH_INFO = Request::PATH_INFO

    KEEP = Next::KEEP
    WRITE = Next::WRITE
    CLOSE = Next::CLOSE
    RELEASE = Next::RELEASE

    include Idleness, Body, Rejection, WriteBehind, LoopResults, HandingOff

    attr_reader :deadline, :request

    # origin: its listener's index among the shared ones (HandingOff).
    def initialize(io, request, context, origin = nil)
      @io = io
      @origin = origin
      @fd = io.fileno
      @request = request
      @out = request.out
      @context = context
      @dispatcher = context.dispatcher
      limits = context.limits
      @keepalive_timeout = limits.keepalive_timeout
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
      @arrived = 0.0 # when the current request's first bytes arrived (Arrival); 0.0: unknown
      @deadline = Clock.now + @header_timeout # the first request's head: from accept
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
        arrived = Arrival.recv(@fd, into, READ_SIZE)
        return KEEP if arrived == :wait_readable
        return CLOSE if arrived.nil?

        n = into.bytesize
        if @state == LINGER
          return CLOSE if (@lingered += n) > LINGER_MAX_BYTES

          next
        end
        buffered(into, arrived)
        action = process
        return action unless action == KEEP
        return KEEP if n < READ_SIZE
      end
    rescue IOError, SystemCallError
      CLOSE
    end

    # No request has been complete on it yet: a new connection whose first
    # request has not arrived (Dispatcher::AcceptGate counts it as claiming a thread).
    def awaiting_first_request?
      @requests.zero?
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

    # Once the responder returned: KEEP it for the next request, WRITE the
    # spool's rest, CLOSE it, or RELEASE it (hijacked). Only answers.
    def after_response(outcome)
      hijacked = outcome == RELEASE || @request.hijacked?
      return start_send(outcome) if !hijacked && @out.pending?

      finish_request
      return RELEASE if hijacked
      # KEEP: the head said keep-alive, so the connection stays even if a
      # graceful stop began since (with threads, while the app ran): its
      # client may send the next request at once
      return CLOSE unless outcome == KEEP

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

    def new_parser
      limits = @context.limits
      HttpParser.new.configure(limits.max_request_line, limits.max_header_size,
                               limits.max_header_fields, limits.max_body_size)
    end

    # Parses what is buffered; hands on each complete request.
    def process
      @parser ||= new_parser
      while true # rubocop:disable Style/InfiniteLoop
        start_request if @state == IDLE
        if @state == HEAD
          @off = @parser.execute(@env, @buf, @off)
          return head_waits unless @parser.head_done?
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

    def start_request
      @state = HEAD
      @env = @request.start
      @idle_deadline = @deadline
      @deadline = Clock.now + @header_timeout if @requests > 0 # rubocop:disable Style/NumericPredicate
    end

    # The head is not complete. Only empty lines so far (allowed before a
    # request line, sent by some clients after a body): still idle.
    def head_waits
      if @off >= @buf.bytesize && !@env.key?(REQUEST_METHOD)
        @state = IDLE
        @deadline = @idle_deadline
      end
      KEEP
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

    # The request is complete: the dispatcher runs it (#after_response).
    def serve
      @requests += 1
      @request.complete(@input, @parser.http11?, @parser.keepalive?, @parser.queue_stamp?, @env[REQUEST_METHOD],
                        @requests, Arrival.since(@arrived))
      @state = SERVING
      @deadline = NO_DEADLINE
      after_response(@dispatcher.dispatch(@request))
    end

    # Bytes just read into `into` join what is buffered; the first of a
    # request set when it arrived (its queue time runs from then).
    def buffered(into, arrived)
      @arrived = arrived if @state == IDLE
      into.equal?(@buf) ? @off = 0 : @buf << @rbuf
    end

    def finish_request
      @request.finish
      @parser&.reset
      @input&.close
      @input = nil
      @env = nil
      @state = IDLE
    end
  end
end
