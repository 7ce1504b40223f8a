# frozen_string_literal: true

module Narwhal
  # What passes from the reading side (Connection) to the responder: the
  # Rack env of a complete request, how it may be answered (flags), and the
  # connection's writer. One per connection, reused for every request on it,
  # so that a request costs no object of its own; the RequestLoop's spare
  # one (Connection::Factory) serves new connections one after another
  # until one of them stays and keeps it.
  #
  # It also holds what the app may reach through env for the whole
  # connection: rack.hijack, rack.early_hints and the lists behind
  # rack.response_finished and rack.after_reply.
  class Request
    autoload :Input, "narwhal/request/input"
    autoload :NullInput, "narwhal/request/input"
    autoload :Threaded, "narwhal/request/threaded"

    REMOTE_ADDR = "REMOTE_ADDR"
    RACK_INPUT = "rack.input"
    RACK_HIJACK = "rack.hijack"
    RACK_HIJACK_IO = "rack.hijack_io"
    RESPONSE_FINISHED = "rack.response_finished"
    AFTER_REPLY = "rack.after_reply"
    EARLY_HINTS = "rack.early_hints"
    REQUEST_METHOD = "REQUEST_METHOD"
    PATH_INFO = "PATH_INFO"
    HEAD_METHOD = "HEAD"
    HTTP11 = ResponseHead::REQ_HTTP11
    KEEPALIVE = ResponseHead::REQ_KEEPALIVE
    HEAD = ResponseHead::REQ_HEAD

    # What a request asks of the serving process it runs in when it runs
    # in none (a Connection::Context: #stopping turns true on a graceful
    # stop; its limits say keepalive_requests).
    NOT_STOPPING = Struct.new(:stopping, :shedding, :limits).new(false, nil, nil).freeze

    # env: the current request's, nil between requests. out: the
    # connection's SocketWriter.
    attr_reader :env, :out, :finished_callbacks, :after_reply

    # template: the listener's env defaults (frozen, shared); early_hints:
    # whether rack.early_hints is offered; context: the serving process's
    # Connection::Context (see NOT_STOPPING).
    # Positional, and the env built key by key: one is made per
    # connection, and keywords through Class#new, a Hash literal or a
    # Method object would each cost an object more.
    def initialize(template, out, remote_addr, early_hints = false, context = NOT_STOPPING)
      @out = out
      @context = context
      limits = context.limits
      @max_requests = limits ? limits.keepalive_requests : Float::INFINITY
      @rebalance = limits&.keepalive_rebalance || Float::INFINITY # off: no wait is too long
      @finished_callbacks = []
      @after_reply = []
      @template = env = template.dup
      env[REMOTE_ADDR] = remote_addr
      env[RACK_HIJACK] = self # #call
      env[RESPONSE_FINISHED] = @finished_callbacks
      env[AFTER_REPLY] = @after_reply
      env[EARLY_HINTS] = method(:early_hints) if early_hints
      @env = nil
      @flags = 0
      @hijacked = false
      @request_method = nil
      @queue_stamp = false
      @waited = nil
      @first_here = 1 # the connection's first request in this process (#handed_over)
    end

    # The client's address, for a Request that serves one connection after
    # another (the RequestLoop's, until a connection keeps it).
    def remote_addr=(addr)
      @template[REMOTE_ADDR] = addr
    end

    # A new request starts: the parser fills the env returned.
    def start
      @env = @template.dup
    end

    # The request is complete: input is its body (nil without one);
    # keepalive: the parser's verdict (HTTP/1.1 without `Connection: close`,
    # or HTTP/1.0 asking keep-alive); queue_stamp: its head has a proxy's
    # X-Request-Start (or X-Queue-Start), which only then is looked for
    # (Responder::QueueTime); method: its REQUEST_METHOD, when the caller
    # has it at hand; requests: how many the connection has had, this one
    # counted; waited: how long it waited for the server since its bytes
    # arrived (the kernel's queue time, seconds; nil unknown).
    #
    # Keep-alive is decided here and in #flags, for the server's side: the
    # parser's verdict, keepalive_requests and keepalive_rebalance now, the
    # server's state (a graceful stop, shedding) when the head is written.
    # keepalive_rebalance: a request that waited longer than it on a kept-
    # alive connection was held there by a busy worker; while a sibling has
    # an idle thread, the connection is let go after its response, so that
    # the client (a proxy's pooled connection) reconnects and the kernel
    # gives the new one to the free worker. The app's side
    # (its Connection header, a body whose length cannot be told) is the
    # response head's (ResponseHead, response.c), which writes the answer.
    def complete(input, http11, keepalive, queue_stamp = false, method = @env[REQUEST_METHOD], requests = 1,
                 waited = nil)
      @env[RACK_INPUT] = input.to_io if input
      @request_method = method
      @queue_stamp = queue_stamp
      @waited = waited
      flags = http11 ? HTTP11 : 0
      # the wait is compared here, the rest only for one that was long
      flags |= KEEPALIVE if keepalive && requests < @max_requests && (waited.nil? || waited <= @rebalance ||
                                                                       !pinned?(requests))
      flags |= HEAD if method == HEAD_METHOD
      @flags = flags
    end

    # The response's flags (ResponseHead's REQ_* bits), asked as its head
    # is written: keep-alive ends once a graceful stop began.
    def flags
      close_connection if @context.stopping
      @flags
    end

    # The method as the client sent it (the env's may change in the app),
    # for the scoreboard.
    attr_reader :request_method
    # Whether the head had X-Request-Start or X-Queue-Start (#complete).
    attr_reader :queue_stamp
    alias queue_stamp? queue_stamp
    # How long it waited for the server since its bytes arrived (the
    # kernel's queue time, seconds; nil: unknown, a Unix socket's).
    attr_reader :waited

    # A request that waited past keepalive_rebalance for this worker: on a
    # kept-alive connection (not its first here), while a sibling has an idle
    # thread, the wait was the connection's. With every worker busy a
    # reconnect would only move the wait to the listen queue.
    def pinned?(requests)
      requests > @first_here && @context.shedding&.sibling_idle? == true
    end
    private :pinned?

    # The connection came from a sibling worker after requests on it
    # (keepalive_release): the wait of the next one was there, and is no
    # reason to let go of it here.
    def handed_over(requests)
      @first_here = requests + 1
    end

    # The response will say Connection: close (the worker sheds the client).
    def close_connection
      @flags &= ~KEEPALIVE
    end

    # Also before #complete: a request refused while being read.
    def head?
      !@env.nil? && @env[REQUEST_METHOD] == HEAD_METHOD
    end

    attr_reader :hijacked
    alias hijacked? hijacked # an attribute reader: no method frame per call

    # The response is done: ready for the next request on the connection.
    def finish
      @env = nil
      @flags = 0
      @finished_callbacks.clear
      @after_reply.clear
    end

    # rack.hijack (full hijack): the app takes the socket, after anything
    # spooled for it (103 Early Hints). env["rack.hijack"] is the request
    # itself: the app calls it. It and #early_hints write from within the
    # app's code: a soft timeout waits for them (Responder::SoftTimeout.deferred).
    def hijack
      Responder::SoftTimeout.deferred { @out.flush }
      @hijacked = true
      # the socket is the app's: no 504 from the master at timeout
      Scoreboard::ThreadSlot.responding!
      @env[RACK_HIJACK_IO] = @out.io if @env
      @out.io
    end
    alias call hijack

    # rack.early_hints: 103 to an HTTP/1.1 client, nothing to others.
    def early_hints(headers)
      Responder::SoftTimeout.deferred { ResponseWriter.early_hints(@out, headers) } if (@flags & HTTP11) != 0
      nil
    end
  end
end
