# frozen_string_literal: true

module Narwhal
  # A single serving process: binds the listeners, runs the reactor, and
  # handles the shutdown signals (QUIT graceful, INT/TERM immediate).
  class Server
    Limits = Struct.new(:body_buffer_size, :max_body_size, :max_request_line, :max_header_size,
                        :max_header_fields, :keepalive_timeout, :keepalive_requests, :client_timeout,
                        :write_timeout, keyword_init: true)

    SIGNALS = %w[QUIT INT TERM].freeze

    attr_reader :app, :logger, :limits, :listeners

    def initialize(app, config)
      @app = app
      @config = config
      @logger = config.logger
      @limits = Limits.new(
        body_buffer_size: config[:client_body_buffer_size], max_body_size: config[:client_max_body_size],
        max_request_line: config[:max_request_line], max_header_size: config[:max_header_size],
        max_header_fields: config[:max_header_fields], keepalive_timeout: config[:keepalive_timeout],
        keepalive_requests: config[:keepalive_requests], client_timeout: config[:client_timeout],
        write_timeout: config[:write_timeout]
      ).freeze
      @running = true
      @listeners = []
      @templates = {}
      @signals = []
    end

    def running?
      @running
    end

    def early_hints?
      @config[:early_hints]
    end

    def env_template(listener)
      @templates[listener] ||= base_env.merge(listener.env_defaults).freeze
    end

    # Binds every configured address; raises (nothing left bound) on failure.
    def bind
      @config.listeners.each do |address, options|
        listener = Listener.new(address, options)
        @listeners << listener
        @logger.info("listening on addr=#{listener.address} fd=#{listener.io.fileno}")
      end
    rescue StandardError
      @listeners.each(&:close)
      @listeners.clear
      raise
    end

    def run
      bind if @listeners.empty?
      @reactor = Reactor.new(self)
      @listeners.each { |l| @reactor.add_listener(l) }
      install_signals
      @logger.info("narwhal #{VERSION} serving pid=#{Process.pid}")
      @reactor.run
      @logger.info("exiting pid=#{Process.pid}")
    ensure
      @listeners.each(&:close)
      restore_signals
    end

    private

    def base_env
      {
        "rack.version" => rack_version,
        "rack.errors" => $stderr,
        "rack.input" => NullInput::INSTANCE,
        "rack.multithread" => false,
        "rack.multiprocess" => false,
        "rack.run_once" => false,
        "rack.url_scheme" => "http",
        "rack.hijack?" => true,
        "SCRIPT_NAME" => "",
        "SERVER_SOFTWARE" => "Narwhal #{VERSION}"
      }
    end

    def rack_version
      defined?(::Rack::VERSION) && ::Rack::VERSION.is_a?(Array) ? ::Rack::VERSION : [1, 6]
    end

    # Handlers only queue the signal and wake the loop (self-pipe).
    def install_signals
      @wake_r, @wake_w = IO.pipe
      @reactor.watch(@wake_r) { handle_signals }
      @previous = SIGNALS.to_h do |sig|
        [sig, trap(sig) { @signals << sig; wake }]
      end
    end

    def restore_signals
      @previous&.each { |sig, handler| trap(sig, handler || "DEFAULT") }
      @wake_r&.close
      @wake_w&.close
    end

    def wake
      @wake_w.write_nonblock(".", exception: false)
    end

    def handle_signals
      @wake_r.read_nonblock(64, exception: false)
      while (sig = @signals.shift)
        @running = false
        if sig == "QUIT"
          @logger.info("QUIT received: finishing requests in progress")
          @reactor.stop_accepting
        else
          @logger.info("#{sig} received: exiting now")
          @reactor.close_all
        end
      end
    end
  end
end
