# frozen_string_literal: true

# config/narwhal.rb for examples/systemd/narwhal.service: the pid file is
# the unit's PIDFile=, the listener the socket unit's ListenStream=.
working_directory "/srv/app/current"
pid "/run/narwhal/narwhal.pid"
stderr_path "/var/log/narwhal/narwhal.log"
stdout_path "/var/log/narwhal/narwhal.log"

# Inherited from narwhal.socket. Naming it keeps it (an inherited socket
# the configuration does not name is closed), and without the socket unit
# narwhal binds it itself.
listen "/run/narwhal.sock"

worker_processes Integer(ENV.fetch("WEB_CONCURRENCY", 2))
timeout 30
preload_app true

before_fork do |server, worker|
  # After USR2: once the new master forks its last worker, the old master
  # (its pid is in PIDFile.oldbin) is told to leave. This master's pid is
  # already in the pid file, which systemd reads when the old one exits.
  old_pid_file = "#{server.config[:pid]}.oldbin"
  if old_pid_file != server.pid && worker.nr + 1 >= server.worker_processes
    begin
      old_pid = File.read(old_pid_file).to_i
      Process.kill(:QUIT, old_pid) if old_pid.positive?
    rescue Errno::ENOENT, Errno::ESRCH
      nil # no deploy in progress, or the old master is gone already
    end
  end
end
