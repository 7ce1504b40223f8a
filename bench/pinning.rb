# frozen_string_literal: true

# Keep-alive pinning through nginx (Puma's issue #3892, "keepalive process
# affinity", reproduced the same way): nginx keeps a pool of connections to
# the server (`keepalive` in its upstream); each stays with the worker that
# accepted it, so a request sent on one waits behind that worker's current
# request while a sibling may be idle. As in #3892 the pool is first made
# uneven: a 500 ms request holds one worker while 4 more requests make
# nginx open 4 connections, all taken by the other worker; 4 more requests
# after it leave that worker's connections at the head of nginx's cache,
# which hands out the connection freed last first. Then wrk sends 10 ms
# requests on 2 connections: balanced, no request waits for another;
# pinned, each waits for the other.
#
# Measured with wrk through nginx, p50 and p99 of:
#   - no upstream keep-alive (a new connection per request: the kernel
#     gives each to a free worker): the reference;
#   - upstream keep-alive, narwhal's keepalive_rebalance on (the default);
#   - upstream keep-alive, keepalive_rebalance off.
# Each run starts fresh servers; the result of each is the median of
# --runs runs, interleaved.
#
#   ruby bench/pinning.rb                # 3 runs of 10 s each
#   ruby bench/pinning.rb -r 5 -d 15
require "optparse"
require "tmpdir"
require "socket"
require "rbconfig"

ROOT = File.expand_path("..", __dir__)
opts = { runs: 3, duration: 10, connections: 2, workers: 2 }
OptionParser.new do |o|
  o.on("-r", "--runs N", Integer) { |v| opts[:runs] = v }
  o.on("-d", "--duration SECONDS", Integer) { |v| opts[:duration] = v }
  o.on("-c", "--connections N", Integer, "wrk's connections to nginx (2)") { |v| opts[:connections] = v }
  o.on("-w", "--workers N", Integer, "narwhal's workers of one thread (2)") { |v| opts[:workers] = v }
end.parse!(ARGV)

# /prime: 500 ms; anything else 10 ms (of sleeping: the GVL is free).
APP = <<~RU
  run lambda { |env|
    sleep(env["PATH_INFO"] == "/prime" ? 0.5 : 0.01)
    [200, { "content-type" => "text/plain", "content-length" => "2" }, ["ok"]]
  }
RU

NGINX = <<~CONF
  worker_processes 1;
  pid %<dir>s/nginx.pid;
  error_log %<dir>s/nginx-error.log;
  events { worker_connections 1024; }
  http {
    access_log off;
    upstream narwhal {
      server 127.0.0.1:%<port>d;
      %<keepalive>s
    }
    server {
      listen 127.0.0.1:%<nginx_port>d;
      location / {
        proxy_pass http://narwhal;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
      }
    }
  }
CONF

def free_port
  TCPServer.new("127.0.0.1", 0).then { |s| s.addr[1].tap { s.close } }
end

def wait_for(port, deadline = Time.now + 20)
  loop do
    TCPSocket.new("127.0.0.1", port).close
    return
  rescue SystemCallError
    raise "nothing on port #{port}" if Time.now > deadline

    sleep 0.05
  end
end

# One measurement: [p50, p99] in ms.
def measure(dir, opts, upstream_keepalive:, rebalance:, release: 0.5)
  port = free_port
  nginx_port = free_port
  File.write(File.join(dir, "config.ru"), APP)
  File.write(File.join(dir, "narwhal.rb"), "worker_processes #{opts[:workers]}\nkeepalive_rebalance #{rebalance.inspect}\n" \
                                                   "keepalive_release #{release.inspect}\n")
  narwhal = Process.spawn(RbConfig.ruby, "-I", File.join(ROOT, "lib"), File.join(ROOT, "exe", "narwhal"), "-N",
                          "-l", "127.0.0.1:#{port}", "-c", File.join(dir, "narwhal.rb"), File.join(dir, "config.ru"),
                          out: File::NULL, err: File.join(dir, "narwhal.log"))
  conf = File.join(dir, "nginx.conf")
  File.write(conf, format(NGINX, dir: dir, port: port, nginx_port: nginx_port,
                                 keepalive: upstream_keepalive ? "keepalive 32;" : ""))
  nginx = Process.spawn("nginx", "-c", conf, "-g", "daemon off;", out: File::NULL, err: File::NULL)
  wait_for(port)
  wait_for(nginx_port)
  sleep 1 # every worker booted (the port answers once the first does)
  prime(nginx_port)
  out = `wrk -t 2 -c #{opts[:connections]} -d #{opts[:duration]}s --latency http://127.0.0.1:#{nginx_port}/`
  [percentile(out, "50%"), percentile(out, "99%"), out[/Requests\/sec:\s+(\S+)/, 1].to_f, out[/Non-2xx.*/]]
ensure
  [nginx, narwhal].compact.each do |pid|
    Process.kill(:QUIT, pid)
    Process.wait(pid)
  rescue SystemCallError
    nil
  end
end

# #3892's set-up: one worker held by /prime, 4 requests at once meanwhile,
# whose upstream connections the other worker takes; then 4 at once again,
# of which that worker's are freed last.
def prime(port)
  primer = Thread.new { get(port, "/prime") }
  sleep 0.1 # /prime under way (a schedule, not a synchronisation)
  Array.new(4) { Thread.new { get(port, "/") } }.each(&:join)
  primer.join
  Array.new(4) { Thread.new { get(port, "/") } }.each(&:join)
end

def get(port, path)
  TCPSocket.open("127.0.0.1", port) do |s|
    s.write("GET #{path} HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n")
    s.read
  end
end

def percentile(out, label)
  match = out.match(/^\s+#{Regexp.escape(label)}\s+([\d.]+)(us|ms|s)/) or raise "no #{label} in wrk's output:\n#{out}"
  value, unit = match.captures

  value.to_f * { "us" => 0.001, "ms" => 1.0, "s" => 1000.0 }.fetch(unit)
end

def median(values)
  values.sort[values.size / 2]
end

CASES = {
  "no upstream keep-alive" => { upstream_keepalive: false, rebalance: 0.005 },
  "keep-alive, the defaults" => { upstream_keepalive: true, rebalance: 0.005 },
  "keep-alive, keepalive_release only" => { upstream_keepalive: true, rebalance: nil },
  "keep-alive, keepalive_rebalance only" => { upstream_keepalive: true, rebalance: 0.005, release: nil },
  "keep-alive, both off" => { upstream_keepalive: true, rebalance: nil, release: nil }
}.freeze

results = Hash.new { |h, k| h[k] = [] }
opts[:runs].times do |run|
  CASES.each do |name, kase|
    Dir.mktmpdir("narwhal-pinning") { |dir| results[name] << measure(dir, opts, **kase) }
    warn format("run %d %-38s p50 %6.2f ms  p99 %7.2f ms  %8.0f req/s %s", run + 1, name, *results[name].last)
  end
end

reference = median(results.values.first.map(&:first))
puts "\nnginx (upstream keepalive 32) -> narwhal #{opts[:workers]} workers x 1 thread; wrk -c #{opts[:connections]}, " \
     "#{opts[:duration]} s, median of #{opts[:runs]}; requests of 10 ms after #3892's priming\n\n"
puts "| case | p50 ms | p99 ms | req/s | p50 / no keep-alive |"
puts "|---|---:|---:|---:|---:|"
results.each do |name, runs|
  p50 = median(runs.map { |r| r[0] })
  puts format("| %s | %.2f | %.2f | %.0f | %.2fx |", name, p50, median(runs.map { |r| r[1] }),
              median(runs.map { |r| r[2] }), p50 / reference)
end
