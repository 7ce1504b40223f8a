# frozen_string_literal: true

module Bench
  # QUIT under load: kept-alive clients send requests back to back, straight
  # to the server or through a proxy, and the server is told to finish what
  # it has and exit. Every request it accepted must be answered.
  module Measurements
    QUIT_CONNECTIONS = 16
    # After the server has exited, the load goes on this long: behind a
    # proxy it moves to the other backend, direct it is refused.
    AFTER_EXIT = 1

    module_function

    # +via+: nil (direct), "nginx" or "haproxy". Behind a proxy a second
    # backend, the same server with the same settings, takes the traffic
    # the first one no longer accepts, as in a rolling deploy.
    def quit(server, warmup:, via: nil)
      warm_up(server, warmup) if warmup.positive?
      Dir.mktmpdir("narwhal-bench-proxy-") do |dir|
        if via
          other = second_backend(server, dir)
          other.wait_ready
          proxy = Proxy.new(via, backends: [server.launch.port, other.launch.port], dir: dir)
          proxy.start
        end
        quit_under_load(server, proxy ? proxy.port : server.launch.port)
      ensure
        proxy&.stop
        other&.stop
      end
    end

    def quit_under_load(server, port)
      load = KeptAliveLoad.new(port, connections: QUIT_CONNECTIONS).start
      begin
        sleep EVENT_AT # the load's own clock: the event happens mid-run
        started = Bench.now
        server.signal(server.server.quit)
        Bench.wait_until(EVENT_TIMEOUT, "#{server.server.name} to exit after #{server.server.quit}") do
          server.exited?
        end
        event_s = (Bench.now - started).round(3)
        sleep AFTER_EXIT
      ensure
        result = load.stop
      end
      result.merge("event_s" => event_s)
    end

    def second_backend(server, dir)
      launch = server.launch.dup
      launch.port = Bench.free_port
      launch.dir = dir
      ServerProcess.new(server.server, launch)
    end
  end

  # rubocop:disable Metrics/MethodLength -- a table of scenarios reads best in one place
  def self.quit_scenario(timing)
    quits = ->(server, _variant) { !server.quit.nil? }
    variant = lambda do |key, title, via|
      Variant.new(key: key, title: title, app: "hello_framed.ru", processes: 2, threads: 4, preload: true,
                  servers: quits, stops: true,
                  measure: ->(s) { Measurements.quit(s, warmup: timing.warmup, via: via) })
    end
    Scenario.new(
      name: "quit", title: "quit: graceful shutdown under load",
      about: "#{Measurements::QUIT_CONNECTIONS} kept-alive connections, a thread each, send POSTs back to back; " \
             "#{Measurements::EVENT_AT} s in, the server gets its graceful stop (narwhal, unicorn, pitchfork: " \
             "QUIT; puma: TERM) and the load goes on until #{Measurements::AFTER_EXIT} s after it has exited. " \
             "Lost: a request written on an open connection that got no complete 2xx response (closed or " \
             "reset under it, timed out, or a proxy's 5xx). Behind nginx or haproxy (upstream connections " \
             "kept alive) a second backend, the same server, takes what the first one refuses; a POST sent " \
             "to a backend is never retried on the other. Threaded servers 2 × 4, process-only servers 8 " \
             "processes. A connection whose response says `Connection: close` ends without loss.",
      columns: [Column.new("errors", "requests lost", :errors), Column.new("answered", "answered", :count),
                Column.new("lost_closed", "closed under a request", :count),
                Column.new("lost_status", "proxy 5xx", :count),
                Column.new("refused", "connects refused", :count), Column.new("event_s", "exit took", :s)],
      primary: "errors", lower_is_better: true,
      variants: [variant.call("direct", "QUIT under load, clients connected directly", nil),
                 variant.call("nginx", "QUIT under load, behind nginx", "nginx"),
                 variant.call("haproxy", "QUIT under load, behind haproxy", "haproxy")]
    )
  end
  # rubocop:enable Metrics/MethodLength
end
