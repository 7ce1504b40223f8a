# frozen_string_literal: true

module Bench
  # Measurements of a fast client beside connections that hold the server:
  # clients that never read their response, and idle connections.
  module Measurements
    BIG_REQUEST = "GET /big HTTP/1.1\r\nHost: #{HOST}\r\n\r\n"
    # How long the non-reading clients are given to get the start of their
    # responses before the fast client starts (a server that cannot start
    # them all has them wait in its queue: that is part of what is measured).
    READERS_START = 5
    PROBE_TIMEOUT = 5

    module_function

    def probe(server, requests:, seconds:)
      ProbeClient.new(server.launch.port, requests: requests, seconds: seconds, timeout: PROBE_TIMEOUT).run
    end

    # +readers+ clients ask for a 50 MB streamed body and never read it;
    # then the fast client measures. RSS growth: the peak total RSS of the
    # server's processes during the fast client's run over the total before
    # the readers connected.
    def readers(server, warmup:, readers:, requests:, seconds:)
      warm_up(server, warmup) if warmup.positive?
      before = ProcessTree.total_memory(server.pid)["rss_kb"]
      held = HeldConnections.new(server.launch.port, count: readers, request: BIG_REQUEST,
                                                     wait_for_response: READERS_START)
      held.start
      fast = with_memory(server) { probe(server, requests: requests, seconds: seconds) }
      fast.merge(held.stop).merge("rss_before_mb" => (before / 1024.0).round(1),
                                  "rss_growth_mb" => (fast["peak_rss_mb"] - before / 1024.0).round(1))
    end

    # +connections+ connections opened at once that send nothing; the fast
    # client starts as soon as they are issued. At its end, how many of them
    # the server has not taken (half-open, or in the accept queue).
    def idle(server, warmup:, connections:, requests:, seconds:)
      warm_up(server, warmup) if warmup.positive?
      held = HeldConnections.new(server.launch.port, count: connections, at_once: true)
      held.start
      fast = with_memory(server) { probe(server, requests: requests, seconds: seconds) }
      untaken = ProcessTree.untaken_connections(server.launch.port)
      fast.merge(held.stop).merge(untaken)
    end
  end
end
