# frozen_string_literal: true

module Bench
  # What one server is started with: the app, where it listens, its shape.
  Launch = Struct.new(:app, :port, :processes, :threads, :dir, :preload, keyword_init: true) do
    def bind
      "#{HOST}:#{port}"
    end

    def config_file(name, text)
      path = File.join(dir, name)
      File.write(path, text)
      path
    end

    def pid_file
      File.join(dir, "server.pid")
    end
  end

  # One server under test: how to start it for a Launch, and how it restarts.
  # +model+ says how it runs requests concurrently:
  #   :processes  one request per process: gets processes × threads processes
  #   :threads    processes × threads
  #   :fibers     processes, each running any number of requests on fibers
  #   :reference  not a Ruby server (nginx), for the ceiling of the machine
  class Server
    attr_reader :name, :model, :restart, :settings, :quit

    # restart: nil (none), :reexec (USR2, wait for the new master, QUIT the old)
    # or a signal name that makes the server replace its workers in place.
    # threads: a fixed number of threads per process, whatever the scenario
    # gives threaded servers (an extra narwhal, run.rb --narwhal-threads).
    # quit: its graceful stop signal (finish what it has, then exit), if any.
    def initialize(name, model:, settings:, restart: nil, threads: nil, quit: nil, &command)
      @name = name
      @model = model
      @settings = settings
      @restart = restart
      @quit = quit
      @threads = threads
      @command = command
    end

    # [env, argv] for Process.spawn.
    def command(launch)
      @command.call(launch)
    end

    # The processes and threads per process this server gets for a scenario
    # that asks for +processes+ × +threads+.
    def shape(processes, threads)
      return [processes, @threads] if @threads

      case model
      when :processes then [processes * threads, 1]
      when :fibers then [processes, 1]
      else [processes, threads]
      end
    end

    def ruby?
      model != :reference
    end

    def multi_process?(processes)
      !(name == "puma" && processes == 1)
    end
  end

  SERVERS = {}

  def self.server(name, **opts, &command)
    SERVERS[name] = Server.new(name, **opts, &command)
  end

  class << self
    # Extra RUBYOPT for every Ruby server (run.rb --ruby-opt), e.g. --yjit.
    attr_accessor :ruby_opt
  end

  def self.bundle(*argv)
    env = { "BUNDLE_GEMFILE" => GEMFILE, "RACK_ENV" => "production" }
    env["RUBYOPT"] = [ENV.fetch("RUBYOPT", nil), ruby_opt].compact.join(" ") if ruby_opt
    [env, ["bundle", "exec", *argv]]
  end

  # Unicorn's configuration language; narwhal reads it unchanged.
  def self.unicorn_config(launch, preload: true)
    <<~RUBY
      worker_processes #{launch.processes}
      preload_app #{preload}
      listen "#{launch.bind}", backlog: #{BACKLOG}
      pid "#{launch.pid_file}"
      timeout 60
    RUBY
  end

  # Narwhal's config: Unicorn's, plus `threads T` where the scenario gives
  # threaded servers more than one thread (with 1 the file is Unicorn's).
  def self.narwhal_config(launch)
    threads = ("threads #{launch.threads}\n" if launch.threads > 1)
    "#{unicorn_config(launch, preload: launch.preload)}#{threads}"
  end

  server "narwhal", model: :threads, restart: :reexec, quit: "QUIT",
                    settings: "unicorn.conf.rb style config: worker_processes P, `threads T` when T > 1, " \
                              "preload_app true, listen backlog: #{BACKLOG}, no access log (RACK_ENV=production)" do |l|
    bundle("narwhal", "-c", l.config_file("narwhal.conf.rb", narwhal_config(l)), l.app)
  end

  # narwhal with `threads N` in each process whatever the scenario (run.rb
  # --narwhal-threads N), e.g. hello at threads 1 and at threads 5 in one run.
  def self.add_narwhal_threads(count)
    raise ArgumentError, "--narwhal-threads expects an integer above 1, got #{count}" unless count > 1

    server "narwhal-t#{count}", model: :threads, restart: :reexec, quit: "QUIT", threads: count,
                                settings: "narwhal with `threads #{count}` in each process, else as narwhal" do |l|
      bundle("narwhal", "-c", l.config_file("narwhal.conf.rb", narwhal_config(l)), l.app)
    end
  end

  # Another checkout of narwhal (run.rb --baseline DIR, its extension
  # built): before/after numbers from one interleaved run rather than from
  # two runs on a drifting machine. It runs as a process-only server
  # (P × T processes, Unicorn's config), as narwhal did before request
  # threads, so the numbers stay comparable with that narwhal too.
  def self.add_baseline(dir)
    dir = File.expand_path(dir)
    so = File.join(dir, "lib", "narwhal_http", "narwhal_http.so")
    raise ArgumentError, "#{so} missing: run `bundle exec rake compile` in #{dir}" unless File.exist?(so)

    commit = `git -C #{dir} rev-parse --short HEAD 2>/dev/null`.strip
    server "narwhal-baseline", model: :processes, restart: :reexec, quit: "QUIT",
                               settings: "narwhal at #{commit.empty? ? dir : commit}, process-only: P × T processes, " \
                                         "narwhal's config without `threads`" do |l|
      narwhal_from(dir, l.config_file("narwhal.conf.rb", unicorn_config(l, preload: l.preload)), l.app)
    end
    # This tree is then started the same way, not through the gem's binstub:
    # the launch path alone moves hello's keep-alive p99 (the worker's heap
    # is left fuller or emptier at fork), which must not pass for a change.
    server "narwhal", model: :threads, restart: :reexec, quit: "QUIT",
                      settings: "as below, started as `ruby -I lib exe/narwhal` like narwhal-baseline" do |l|
      narwhal_from(ROOT, l.config_file("narwhal.conf.rb", narwhal_config(l)), l.app)
    end
  end

  # `ruby -I DIR/lib DIR/exe/narwhal -c conf app` under the bench bundle.
  def self.narwhal_from(dir, conf, app)
    env, argv = bundle("ruby", "-I", File.join(dir, "lib"), File.join(dir, "exe", "narwhal"), "-c", conf, app)
    # a USR2 re-exec runs exe/narwhal again, without our -I
    [env.merge("RUBYLIB" => File.join(dir, "lib")), argv]
  end

  server "puma", model: :threads, restart: "USR1", quit: "TERM",
                 settings: "single mode (-w 0) for 1 process, else cluster mode with preload_app!; " \
                           "threads T:T; bind ?backlog=#{BACKLOG}; quiet (no request log); " \
                           "phased restart (USR1) needs preload off, so the restart row runs without it" do |l|
    cluster = l.processes > 1
    conf = l.config_file("puma.rb", <<~RUBY)
      environment "production"
      bind "tcp://#{l.bind}?backlog=#{BACKLOG}"
      threads #{l.threads}, #{l.threads}
      workers #{cluster ? l.processes : 0}
      #{'preload_app!' if cluster && l.preload}
      pidfile "#{l.pid_file}"
      log_requests false
    RUBY
    bundle("puma", "-C", conf, l.app)
  end

  server "unicorn", model: :processes, restart: :reexec, quit: "QUIT",
                    settings: "worker_processes N, preload_app true, listen backlog: #{BACKLOG}" do |l|
    conf = l.config_file("unicorn.conf.rb", unicorn_config(l, preload: l.preload))
    bundle("unicorn", "-E", "production", "-c", conf, l.app)
  end

  # Pitchfork always loads the app before forking (it has no preload_app).
  server "pitchfork", model: :processes, quit: "QUIT",
                      settings: "worker_processes N, listen backlog: #{BACKLOG}; the app is always " \
                                "loaded before forking; no re-exec restart (deploys start a new server)" do |l|
    conf = l.config_file("pitchfork.conf.rb", <<~RUBY)
      worker_processes #{l.processes}
      listen "#{l.bind}", backlog: #{BACKLOG}
      timeout 60
    RUBY
    bundle("pitchfork", "-c", conf, l.app)
  end

  # --preload loads the app's libraries before forking; falcon serve loads the
  # rackup file itself in each process. Backlog: io-endpoint's (SOMAXCONN).
  server "falcon", model: :fibers, restart: "HUP",
                   settings: "falcon serve --forked --count N (fibers: any number of requests per process), " \
                             "--preload of the app's data file, CONSOLE_LEVEL=error (no request log); " \
                             "listen backlog not settable (SOMAXCONN)" do |l|
    env, argv = bundle("falcon", "serve", "--bind", "http://#{l.bind}", "--forked", "--count", l.processes.to_s,
                       "-c", l.app)
    preload = App.preload_file(l.app)
    argv += ["--preload", preload] if preload
    [env.merge("CONSOLE_LEVEL" => "error"), argv]
  end

  server "iodine", model: :threads,
                   settings: "iodine -w N -t T (app loaded before forking, no request log by default); " \
                             "listen backlog not settable (SOMAXCONN); USR1 restarts workers",
                   restart: "USR1" do |l|
    bundle("iodine", "-b", HOST, "-p", l.port.to_s, "-w", l.processes.to_s, "-t", l.threads.to_s, l.app)
  end

  server "agoo", model: :threads,
                 settings: "Agoo::Server.init(worker_count: N, thread_count: T, poll_timeout: 0.001) from " \
                           "bench/servers/agoo.rb; thread_count 0 (the main thread) for 1 thread; logging off; " \
                           "backlog not settable" do |l|
    bundle("ruby", File.join(DIR, "servers", "agoo.rb"), l.app, l.port.to_s, l.processes.to_s, l.threads.to_s)
  end

  server "nginx", model: :reference,
                  settings: "nginx (Debian package) worker_processes P (the table's processes), " \
                            "`return 200 \"Hello, Rack!\"`, " \
                            "access_log off, listen backlog=#{BACKLOG}" do |l|
    conf = l.config_file("nginx.conf", <<~NGINX)
      worker_processes #{l.processes};
      daemon off;
      pid #{l.dir}/nginx.pid;
      error_log #{l.dir}/nginx-error.log;
      events { worker_connections 4096; }
      http {
        access_log off;
        client_body_temp_path #{l.dir};
        proxy_temp_path #{l.dir};
        fastcgi_temp_path #{l.dir};
        uwsgi_temp_path #{l.dir};
        scgi_temp_path #{l.dir};
        server {
          listen #{l.bind} backlog=#{BACKLOG};
          location / { default_type text/html; return 200 "Hello, Rack!"; }
        }
      }
    NGINX
    [{}, ["nginx", "-c", conf, "-p", l.dir]]
  end

  # Finds the file an app keeps its preloaded data in, for servers that can
  # only preload a plain Ruby file.
  module App
    def self.preload_file(app)
      data = app.sub(/\.ru\z/, "_data.rb")
      File.exist?(data) ? data : nil
    end
  end
end
