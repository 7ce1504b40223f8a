# frozen_string_literal: true

module Narwhal
  class Configurator
    # Puma's configuration directives, each with what to write instead in a
    # narwhal config (the arguments given are carried over). A Puma line is a
    # config error that says so; none is accepted silently, because each one
    # either has another name here or behaves differently, and a config that
    # runs should do what it says. Listed in docs/CONFIGURATION.md.
    module PumaDirectives
      SIGNALS = "stop, restart and reload with signals to the master (docs/SIGNALS.md)"
      NO_STATE = "narwhal keeps no state file: narwhal status --control ADDR asks the control listener " \
                 "(control_listen ADDR); #{SIGNALS}, whose pid is in the pid file (pid PATH)".freeze
      NO_TLS = "narwhal does not terminate TLS; put nginx or haproxy in front (examples/nginx.conf) and listen " \
               "on a local port or a Unix socket"
      ACCESS_LOG = "use access_log PATH (format: :combined or :json) for narwhal's own access log, off by " \
                   "default; in development rackup's Rack::CommonLogger also logs (-N removes it)"
      NAKAYOSHI = "with preload_app true, call GC.compact (Ruby 3.3+: Process.warmup) in " \
                  "before_fork { |server, worker| ... }, which runs in the master before each fork"
      # for a before_fork block without arguments, Puma's form
      BEFORE_FORK = "Puma's before_fork runs once; narwhal's runs in the master before every fork, respawns " \
                    "included (write before_fork do |server, worker| ... end; closing database connections there " \
                    "is right to repeat)"
      NO_SHUTDOWN_HOOK = "narwhal has no worker shutdown hook; an at_exit block set in after_fork runs when a " \
                         "worker exits after QUIT"
      READY = "use after_worker_ready { |server, worker| ... } (runs in each worker once it serves)"

      ADVICE = {
        workers: ->(count = "N", *) { "use worker_processes #{count}" },
        port: ->(port = "PORT", host = nil, *) { port_advice(port, host) },
        bind: ->(url = "tcp://HOST:PORT", *) { bind_advice(url.to_s) },
        ssl_bind: NO_TLS,
        environment: ->(env = "ENV", *) { "use -E #{env} on the command line (it sets RACK_ENV)" },
        pidfile: ->(path = "PATH", *) { "use pid #{path.to_s.inspect}" },
        stdout_redirect: lambda do |out = nil, err = nil, *|
          parts = { stdout_path: out, stderr_path: err }.compact.map { |k, v| "#{k} #{v.to_s.inspect}" }
          "use #{parts.empty? ? 'stdout_path and stderr_path' : parts.join(' and ')} (narwhal always appends)"
        end,
        directory: ->(dir = "DIR", *) { "use working_directory #{dir.to_s.inspect}" },
        rackup: ->(path = "config.ru", *) { "give the rackup file as the argument: narwhal -c CONFIG #{path}" },
        preload_app!: "use preload_app true",
        daemonize: "use -D on the command line",
        debug: "use -d on the command line",
        quiet: ACCESS_LOG,
        log_requests: ACCESS_LOG,
        custom_logger: "use logger OBJECT",
        log_formatter: "use logger Logger.new($stderr, formatter: ...)",
        tag: "narwhal has no process tag; its processes are titled \"narwhal master\" and \"narwhal worker[N]\"",
        on_worker_boot: :after_fork_advice,
        before_worker_boot: :after_fork_advice,
        on_worker_fork: "use before_fork { |server, worker| ... } (runs in the master before each fork)",
        before_worker_fork: "use before_fork { |server, worker| ... } (runs in the master before each fork)",
        after_worker_fork: READY,
        after_worker_boot: READY,
        on_booted: READY,
        after_booted: READY,
        on_worker_shutdown: NO_SHUTDOWN_HOOK,
        before_worker_shutdown: NO_SHUTDOWN_HOOK,
        after_worker_shutdown: "use after_worker_exit { |server, worker, status| ... } (runs in the master)",
        on_restart: "use before_exec { |server| ... } (runs before USR2 re-executes the master)",
        before_restart: "use before_exec { |server| ... } (runs before USR2 re-executes the master)",
        worker_timeout: lambda do |seconds = "SECONDS", *|
          "use timeout #{seconds} (a worker on one request for longer is killed)"
        end,
        worker_boot_timeout: "narwhal has no boot timeout: a worker may take as long as it needs to load the app",
        worker_shutdown_timeout: lambda do |seconds = "SECONDS", *|
          "use graceful_timeout #{seconds} (workers still busy that long after QUIT are killed)"
        end,
        persistent_timeout: ->(seconds = "SECONDS", *) { "use keepalive_timeout #{seconds}" },
        first_data_timeout: ->(seconds = "SECONDS", *) { "use client_timeout #{seconds}" },
        max_keep_alive: ->(count = "N", *) { "use keepalive_requests #{count}" },
        http_content_length_limit: ->(bytes = "BYTES", *) { "use client_max_body_size #{bytes}" },
        lowlevel_error_handler: "narwhal has no such hook: an exception in the app is logged and answered 500",
        plugin: lambda do |name = nil, *|
          return "narwhal has no plugins; for tmp_restart send USR2 (new code, no downtime) or HUP to the master" if
            name.to_s == "tmp_restart"

          "narwhal has no plugins"
        end,
        state_path: NO_STATE,
        state_permission: NO_STATE,
        activate_control_app: ->(url = "tcp://127.0.0.1:9293", *) { control_advice(url.to_s) },
        nakayoshi_fork: NAKAYOSHI,
        fork_worker: "narwhal does not refork from a worker; preload_app true shares the app's memory " \
                     "copy-on-write",
        silence_single_worker_warning: "remove it: narwhal does not warn about a single worker"
      }.freeze

      # What to write instead of Puma's directive name, or nil for another
      # name. preload: the file preloads the app.
      def self.advice(name, args, preload: false)
        rule = ADVICE[name]
        return nil unless rule

        text = case rule
               when String then rule
               when Symbol then public_send(rule, preload: preload)
               else rule.call(*args)
               end
        "#{name} is a Puma directive: #{text}"
      end

      # Puma's on_worker_boot is where a preloaded app reconnects: after_fork
      # is the same moment.
      def self.after_fork_advice(preload:)
        moment = if preload
                   "; with preload_app the app is loaded already: reconnect to databases here"
                 else
                   ", before it loads the app"
                 end
        "use after_fork { |server, worker| ... } (runs in each worker right after the fork#{moment})"
      end

      def self.control_advice(url)
        address = bind_advice(url)[/\Ause listen (".*?")/, 1] || url.inspect
        "use control_listen #{address} (GET /status, /metrics, /health, /ready; narwhal status prints /status); " \
          "#{SIGNALS}"
      end

      def self.port_advice(port, host)
        address = host ? "#{host.to_s.include?(':') ? "[#{host}]" : host}:#{port}" : ":#{port}"
        other = host ? "-l #{address}" : "-o 0.0.0.0 -p #{port}"
        "use listen #{address.inspect} (on the command line: #{other})"
      end

      # tcp://host:port and unix:///path as listen addresses; query options
      # narwhal's listen shares are carried over.
      def self.bind_advice(url)
        return NO_TLS if url.start_with?("ssl://")

        address, query = url.split("?", 2)
        address = address.to_s
        address = if address.start_with?("unix://")
                    path = address.delete_prefix("unix://")
                    path.start_with?("/") ? path : "./#{path}"
                  else
                    address.delete_prefix("tcp://")
                  end
        "use listen #{address.inspect}#{listen_options(query)}"
      end

      def self.listen_options(query)
        options = query.to_s.split("&").filter_map do |pair|
          key, value = pair.split("=", 2)
          case key
          when "backlog" then "backlog: #{value}"
          when "umask" then "umask: 0o#{value.to_i(8).to_s(8)}"
          when "low_latency" then "tcp_nodelay: #{value != 'false'}"
          end
        end
        options.empty? ? "" : ", #{options.join(', ')}"
      end
    end
  end
end
