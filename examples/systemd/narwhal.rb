# frozen_string_literal: true

# config/narwhal.rb for examples/systemd/narwhal.service: the listener is
# the socket unit's ListenStream=; the log goes to standard error, which
# systemd keeps in the journal.
working_directory "/srv/app/current"
# the before_fork hook below finds the old master through PATH.oldbin
pid "/run/narwhal/narwhal.pid"

# Inherited from narwhal.socket. Naming it keeps it (an inherited socket
# the configuration does not name is closed), and without the socket unit
# narwhal binds it itself.
listen "/run/narwhal.sock"

# one worker per CPU the unit may use (CPUQuota=, AllowedCPUs=); the log
# says what was found and why. An app that mostly waits on other services
# may want a number instead.
worker_processes :auto
timeout 30
preload_app true

before_fork do |server, worker|
  # After USR2: once the new master forks its last worker, the old master
  # (its pid is in PATH.oldbin) is told to leave; it hands the unit over to
  # this master (MAINPID=) as it does.
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
