# frozen_string_literal: true

module Bench
  # Connections a child process holds open while a fast client measures:
  # clients that send a request and never read the response, or idle ones
  # that connect and send nothing. When stopped it reports what the kernel
  # says of each of them (TCP_INFO's state): still open, still waiting in
  # SYN_SENT for the server to take them, or closed by the server.
  class HeldConnections
    # Linux's TCP states (include/net/tcp_states.h), as the client sees them.
    ESTABLISHED = 1
    SYN_SENT = 2
    CLOSED_BY_PEER = [7, 8].freeze # CLOSE (reset), CLOSE_WAIT (the server's FIN)
    # Room kept for the process's other descriptors.
    SPARE_FDS = 64

    # +request+: written on each connection once it is open (nil: none).
    # +at_once+: connect all without waiting for any (a burst of SYNs);
    # else one after the other, each open before the next.
    # +wait_for_response+: before saying ready, wait up to this long for
    # every connection to have the start of a response.
    def initialize(port, count:, request: nil, at_once: false, wait_for_response: nil)
      @port = port
      @count = count
      @request = request
      @at_once = at_once
      @wait_for_response = wait_for_response
    end

    # Forks the child; returns once every connection is issued (at once) or
    # open, with how many were.
    def start
      soft, = Process.getrlimit(:NOFILE)
      raise "#{@count} connections need more than the #{soft} descriptors allowed" if @count + SPARE_FDS > soft

      @result_r, result_w = IO.pipe
      ready_r, ready_w = IO.pipe
      @stop_r, @stop_w = IO.pipe
      @pid = fork { child(result_w, ready_w) }
      [result_w, ready_w, @stop_r].each(&:close)
      ready = ready_r.read
      ready_r.close
      return ready.to_i unless ready.empty?

      Process.wait(@pid)
      raise "the connection holder failed before it was ready (#{$?.inspect})"
    end

    def stop
      @stop_w.close
      data = @result_r.read
      Process.wait(@pid)
      raise "the connection holder failed (#{$?.inspect})" if data.empty?

      Marshal.load(data) # rubocop:disable Security/MarshalLoad -- our own child's output
    end

    private

    # Leaves by exit! whatever happens: a fork of the runner must not run
    # the runner's exit handlers.
    def child(result, ready)
      @result_r.close
      @stop_w.close
      socks = @at_once ? connect_at_once : Array.new(@count) { connect }.compact
      @responding = wait_for_responses(socks)
      ready.write(socks.size.to_s)
      ready.close
      @stop_r.read # until the parent closes its end
      result.write(Marshal.dump(report(socks)))
      exit!(0)
    rescue StandardError => e
      warn "connection holder: #{e.class}: #{e.message}"
      exit!(1)
    end

    def connect
      s = Socket.tcp(HOST, @port, connect_timeout: 5)
      s.write(@request) if @request
      s
    rescue SystemCallError
      nil
    end

    def connect_at_once
      addr = Socket.sockaddr_in(@port, HOST)
      socks = Array.new(@count) do
        s = Socket.new(:INET, :STREAM)
        s.connect_nonblock(addr, exception: false)
        s
      end
    end

    # How many connections have the start of a response within the wait.
    def wait_for_responses(socks)
      return nil unless @wait_for_response

      deadline = Bench.now + @wait_for_response
      waiting = socks.dup
      loop do
        waiting.reject! { |s| s.wait_readable(0) }
        break if waiting.empty? || Bench.now > deadline

        sleep POLL
      end
      socks.size - waiting.size
    end

    def report(socks)
      states = socks.map { |s| s.getsockopt(Socket::IPPROTO_TCP, Socket::TCP_INFO).data.unpack1("C") }
      {
        "held" => @count, "not_opened" => @count - socks.size, "responding" => @responding,
        "established" => states.count(ESTABLISHED), "syn_sent" => states.count(SYN_SENT),
        "closed_by_server" => states.count { |st| CLOSED_BY_PEER.include?(st) }
      }
    end
  end
end
