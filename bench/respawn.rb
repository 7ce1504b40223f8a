# frozen_string_literal: true

# How fast a worker killed with SIGKILL is replaced and serving again.
#
#   ruby bench/respawn.rb                 # preload_app true, 20 kills
#   ruby bench/respawn.rb --no-preload    # the app loaded by each new worker
#
# Starts `narwhal -E production` (one worker) on examples/hello.ru, then
# repeatedly: reads the worker's pid, SIGKILLs it, and polls with requests
# until one is answered by a new pid. The time from the kill to that answer
# is the respawn time (reap + fork + ready + serve). Prints min/median/max.

require "socket"
require "tmpdir"
require "rbconfig"

ROOT = File.expand_path("..", __dir__)
preload = !ARGV.include?("--no-preload")
kills = Integer(ENV.fetch("KILLS", 20))

def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

def served?(port)
  s = TCPSocket.new("127.0.0.1", port)
  s.write("GET / HTTP/1.0\r\n\r\n")
  s.read.start_with?("HTTP/1.1 200")
rescue SystemCallError
  false
ensure
  s&.close
end

def children(pid)
  Dir.glob("/proc/[0-9]*/stat").filter_map do |stat|
    f = File.read(stat).split(") ", 2).last.split
    Integer(stat[%r{/proc/(\d+)/}, 1]) if f[1].to_i == pid && f[0] != "Z"
  rescue SystemCallError
    nil
  end
end

Dir.mktmpdir do |dir|
  conf = File.join(dir, "n.rb")
  File.write(conf, "preload_app #{preload}\nworker_processes 1\n")
  port = TCPServer.new("127.0.0.1", 0).then { |s| s.addr[1].tap { s.close } }
  log = File.join(dir, "log")
  master = Process.spawn(RbConfig.ruby, "-I", File.join(ROOT, "lib"), File.join(ROOT, "exe/narwhal"),
                         "-E", "production", "-c", conf, "-l", "127.0.0.1:#{port}",
                         File.join(ROOT, "examples/hello.ru"), out: log, err: log)
  sleep 0.05 until served?(port)
  times = []
  kills.times do
    old = children(master).first
    t0 = now
    Process.kill(:KILL, old)
    loop do
      kid = children(master).first
      break if kid && kid != old && served?(port)

      sleep 0.0005
    end
    times << (now - t0) * 1000
  end
  Process.kill(:TERM, master)
  Process.wait(master)
  times.sort!
  printf("respawn after SIGKILL (preload_app %s, %d kills): min %.1f ms, median %.1f ms, max %.1f ms\n",
         preload, kills, times.first, times[times.size / 2], times.last)
end
