# frozen_string_literal: true

require "etc"
require "logger"

module Narwhal
  # The configuration DSL (`-c FILE`) and the settings it produces.
  #
  # Directive names follow Unicorn's; every setting has a default here and a
  # line in docs/CONFIGURATION.md.
  class Configurator
    autoload :AutoWorkers, "narwhal/configurator/auto_workers"
    autoload :ByteSize, "narwhal/configurator/byte_size"
    autoload :ConnectionCap, "narwhal/configurator/connection_cap"
    autoload :DSL, "narwhal/configurator/dsl"
    autoload :MasterListeners, "narwhal/configurator/master_listeners"
    autoload :Numbers, "narwhal/configurator/numbers"
    autoload :Paths, "narwhal/configurator/paths"
    autoload :PumaDirectives, "narwhal/configurator/puma_directives"
    autoload :Queueing, "narwhal/configurator/queueing"
    autoload :Rackup, "narwhal/configurator/rackup"
    autoload :Recycling, "narwhal/configurator/recycling"
    autoload :UnknownDirective, "narwhal/configurator/unknown_directive"
    autoload :Upgrades, "narwhal/configurator/upgrades"
    autoload :WebConcurrency, "narwhal/configurator/web_concurrency"

    KIB = 1024
    MIB = 1024 * KIB
    GIB = 1024 * MIB

    # Unicorn's hook defaults: no-ops, except that a reaped worker is logged.
    NOOP_HOOK = ->(*) {}
    LOG_EXIT_HOOK = lambda do |server, worker, status|
      message = "reaped #{status.inspect} worker=#{worker.nr}"
      status.success? ? server.logger.info(message) : server.logger.error(message)
    end
    HOOKS = { before_fork: 2, after_fork: 2, after_worker_ready: 2, after_worker_exit: 3, before_exec: 1,
              after_worker_timeout: 3 }.freeze
    HOOK_ARGS = { before_fork: "|server, worker|", after_fork: "|server, worker|",
                  after_worker_ready: "|server, worker|", after_worker_exit: "|server, worker, status|",
                  before_exec: "|server|", after_worker_timeout: "|server, worker, info|" }.freeze

    DEFAULTS = {
      listeners: [],
      logger: nil,
      worker_processes: 1,
      worker_processes_auto: nil, # with :auto, the log line saying why the count
      threads: 1,
      worker_connections: nil, # nil: from the descriptor limit (ConnectionCap)
      timeout: 60,
      soft_timeout: nil,
      soft_timeout_keep_worker: false,
      worker_memory_limit: nil, # bytes; nil: off
      worker_memory_pss: false,
      worker_memory_check_interval: 5,
      worker_max_requests: nil, # nil: off
      worker_max_requests_jitter: 0,
      term_graceful: false,
      drain_delay: 0,
      graceful_timeout: nil, # nil: timeout + Master::KILL_AFTER
      preload_app: false,
      before_fork: NOOP_HOOK,
      after_fork: NOOP_HOOK,
      after_worker_ready: NOOP_HOOK,
      after_worker_exit: LOG_EXIT_HOOK,
      before_exec: NOOP_HOOK,
      after_worker_timeout: NOOP_HOOK,
      pid: nil,
      stderr_path: nil,
      stdout_path: nil,
      working_directory: nil,
      user: nil,
      rewindable_input: true,
      check_client_connection: false,
      default_middleware: true,
      worker_exec: false,
      trust_x_forwarded: true,
      trust_x_request_start: true, # the proxy's X-Request-Start over the kernel's queue time
      queue_deadline: nil, # seconds; nil: off
      queue_deadline_retry_after: 1, # seconds, the shed 503's Retry-After
      keepalive_rebalance: 0.005, # seconds a kept-alive request may wait before its connection is let go
      keepalive_release: 0.5, # seconds idle before a saturated worker hands a connection to a sibling
      orca_load_report: false, # the endpoint-load-metrics response header (LoadReport)
      early_hints: false,
      access_log: nil, # [path, format]
      client_body_buffer_size: 112 * KIB,
      client_max_body_size: 1 * GIB,
      max_request_line: 16 * KIB,
      max_header_size: 112 * KIB,
      max_header_fields: 100,
      keepalive_timeout: 5,
      keepalive_requests: 1000,
      client_timeout: 30,
      client_header_timeout: nil, # nil: client_timeout's value
      client_body_timeout: nil,
      write_timeout: 30,
      response_buffer_size: 64 * KIB,
      response_spool_max: 256 * MIB, # memory, per worker
      response_spool_file_max: 1 * GIB, # per response, as nginx's proxy_max_temp_file_size
      response_spool_disk_max: 4 * GIB, # per worker
      response_spool_disk_reserve: 1 * GIB, # left free on the file system
      default_listen: "127.0.0.1:8080",
      control_listen: nil,
      agent_listen: nil,
      control_status_paths: false, # paths may carry secrets (reset tokens)
      upgrade_timeout: nil, # seconds; nil: a USR2 successor may take as long as it takes
      upgrade_health_path: nil,
      upgrade_health_headers: {}.freeze,
      upgrade_retire_old: false
    }.freeze
    CLIENT_TIMEOUT_PARTS = %i[client_header_timeout client_body_timeout].freeze

    # Request threads per worker at most, and in all workers together: the
    # scoreboard has a sub-slot per thread, and beyond these the GVL leaves
    # threads waiting rather than serving.
    MAX_THREADS = 256
    MAX_TOTAL_THREADS = 4096

    attr_reader :settings, :file

    def initialize(file: nil)
      @settings = DEFAULTS.dup
      @settings[:listeners] = []
      self.worker_processes = WebConcurrency.worker_processes || DEFAULTS[:worker_processes]
      @file = file
      load_file(file) if file
      # client_timeout is the umbrella: it sets each part not given on its own
      CLIENT_TIMEOUT_PARTS.each { |part| @settings[part] ||= @settings[:client_timeout] }
    end

    # A count, or :auto: one worker per CPU the cgroup and the affinity
    # mask allow (AutoWorkers).
    def worker_processes=(count)
      choice = AutoWorkers.choose if count == :auto
      @settings[:worker_processes] = choice ? choice.count : count
      @settings[:worker_processes_auto] = choice&.reason
    end

    # --threads N: wins over the config file.
    def threads_flag(count)
      problem = threads_problem(count) || total_threads_problem(@settings[:worker_processes], count)
      raise ConfigError, "--threads #{count}: #{problem}" if problem

      @settings[:threads] = count
    end

    def threads_problem(count)
      return if count.is_a?(Integer) && count.between?(1, MAX_THREADS)

      "threads expects an Integer from 1 to #{MAX_THREADS}, got #{count.inspect}"
    end

    def total_threads_problem(workers, threads)
      return if workers * threads <= MAX_TOTAL_THREADS

      "worker_processes #{workers} x threads #{threads} is more than #{MAX_TOTAL_THREADS} request threads"
    end

    def [](key)
      @settings.fetch(key)
    end

    # The configuration read again from the same file (HUP).
    def reload
      self.class.new(file: @file)
    end

    LISTEN_OPTIONS = %i[backlog rcvbuf sndbuf tcp_nodelay tcp_nopush ipv6only reuseport umask tries delay
                        tcp_defer_accept accept_filter].freeze

    # Adds a listen address (the later options win for a repeated one).
    def add_listener(address, options = {})
      @settings[:listeners].reject! { |(addr, _)| addr == address }
      @settings[:listeners] << [address, options]
    end

    # [[address, options], ...]; the default address when none was given.
    def listeners
      list = @settings[:listeners]
      list.empty? ? [[@settings[:default_listen], {}]] : list
    end

    def logger
      @settings[:logger] ||= Logger.new($stderr, level: Logger::INFO)
    end

    private

    # Raises ConfigError with every problem of the file, one per line.
    def load_file(path)
      text = read_file(path)
      dsl = DSL.new(self)
      error = ruby_error(path) { dsl.instance_eval(text, File.expand_path(path), 1) }
      problems = dsl.problems(whole_file: error.nil?)
      problems << error if error
      raise ConfigError, problems.join("\n") unless problems.empty?
    end

    # An exception of the file's own Ruby (it ends the reading) as a line.
    def ruby_error(path)
      yield
      nil
    rescue ConfigError => e
      e.message
    rescue ScriptError, StandardError => e
      ErrorMessage.in_file(e, path).sub("#{DSL.name}::", "")
    end

    def read_file(path)
      File.read(path)
    rescue SystemCallError => e
      raise ConfigError, "cannot read config file #{path}: #{ErrorMessage.strerror(e)}"
    end
  end
end
