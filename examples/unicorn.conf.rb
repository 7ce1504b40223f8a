# frozen_string_literal: true

# A production configuration written for Unicorn, unchanged: Narwhal reads
# it as it is. Start with `narwhal -c examples/unicorn.conf.rb -E production -D`.
app_root = File.expand_path(ENV.fetch("APP_ROOT", Dir.pwd))

worker_processes Integer(ENV.fetch("WEB_CONCURRENCY", 4))
working_directory app_root

# nginx talks to the Unix socket; the TCP port is for health checks
listen "#{app_root}/tmp/sockets/unicorn.sock", backlog: 64
listen ENV.fetch("HEALTH_PORT", "8080").to_i, tcp_nopush: true

timeout 30
pid "#{app_root}/tmp/pids/unicorn.pid"
stderr_path "#{app_root}/log/unicorn.stderr.log"
stdout_path "#{app_root}/log/unicorn.stdout.log"

# load the app once in the master; workers share its memory copy-on-write
preload_app true
GC.respond_to?(:copy_on_write_friendly=) && GC.copy_on_write_friendly = true

# Drop privileges in the workers when started as root.
user(ENV["APP_USER"], ENV["APP_GROUP"]) if ENV["APP_USER"]

check_client_connection false

before_fork do |server, worker|
  # the master holds no database connection across fork
  defined?(ActiveRecord::Base) && ActiveRecord::Base.connection.disconnect!

  # Zero-downtime deploys: once the new master forks its last worker, the
  # old master (USR2 left its pid in .oldbin) is told to leave; earlier
  # workers each take one old worker away with TTOU.
  old_pid = "#{server.config[:pid]}.oldbin"
  if old_pid != server.pid
    begin
      sig = (worker.nr + 1) >= server.worker_processes ? :QUIT : :TTOU
      Process.kill(sig, File.read(old_pid).to_i)
    rescue Errno::ENOENT, Errno::ESRCH
      # someone else did our job for us
    end
  end
end

after_fork do |server, worker|
  # per-worker port for debugging one worker; retries while an old worker
  # still holds it during a deploy
  addr = "127.0.0.1:#{Integer(ENV.fetch('WORKER_BASE_PORT', 9293)) + worker.nr}"
  server.listen(addr, tries: -1, delay: 5, tcp_nopush: true)

  defined?(ActiveRecord::Base) && ActiveRecord::Base.establish_connection
end
