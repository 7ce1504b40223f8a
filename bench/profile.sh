#!/usr/bin/env bash
# CPU profile of narwhal serving examples/hello.ru under wrk (keep-alive).
#
#   bench/profile.sh                      # perf record -g, 10 s
#   RUBYOPT=--yjit bench/profile.sh       # the same with YJIT
#   DURATION=5 OUT=/tmp/p bench/profile.sh
#   MODE=close bench/profile.sh           # wrk -H 'Connection: close'
#   PROFILER=stackprof STACKPROF_GEM_DIR=/tmp/stackprof-gems bench/profile.sh
#                                         # Ruby-level profile (see stackprof_hook.rb)
#
# Starts `narwhal -E production` on a free 127.0.0.1 port, warms it up with
# 2 s of wrk, then records the server with `perf record -g` while
# `wrk -t2 -c16 -dDURATIONs` runs, and prints where the time went: by shared
# object (kernel / libruby / narwhal_http.so / ...), the top symbols, and the
# system calls. Leaves perf.data in $OUT for `perf report -i`.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
duration=${DURATION:-10}
out=${OUT:-$(mktemp -d /tmp/narwhal-profile-XXXXXX)}
mkdir -p "$out"
port=$(ruby -rsocket -e 's = TCPServer.new("127.0.0.1", 0); puts s.addr[1]; s.close')

cd "$root"
profiler=${PROFILER:-perf}
hook=()
if [ "$profiler" = stackprof ]; then
  export STACKPROF_OUT="$out/stackprof.dump"
  hook=(-r "$root/bench/stackprof_hook.rb")
fi
BUNDLE_GEMFILE="$root/bench/Gemfile" bundle exec narwhal -E production "${hook[@]}" -l "127.0.0.1:$port" \
  examples/hello.ru >"$out/server.log" 2>&1 </dev/null &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT

# readiness: poll the port
for _ in $(seq 1 1500); do
  if ruby -rsocket -e "Socket.tcp('127.0.0.1', $port, connect_timeout: 1).close" 2>/dev/null; then break; fi
  kill -0 $pid 2>/dev/null || { cat "$out/server.log"; exit 1; }
done
# the worker serves, the master ($pid) only watches: profile the worker
worker=$(pgrep -P $pid | head -1)
[ -n "$worker" ] || { echo "no worker under master $pid"; cat "$out/server.log"; exit 1; }

url="http://127.0.0.1:$port/"
wrk_opts=()
[ "${MODE:-keepalive}" = close ] && wrk_opts=(-H "Connection: close")
wrk -t2 -c16 -d2s "${wrk_opts[@]}" "$url" >/dev/null
if [ "$profiler" = stackprof ]; then
  kill -USR2 $worker
  wrk -t2 -c16 -d"${duration}s" --latency "${wrk_opts[@]}" "$url" >"$out/wrk.txt"
  kill -QUIT $pid # graceful: the worker runs its at_exit and writes the dump
  wait $pid || true
  trap - EXIT
  echo "# narwhal stackprof (cpu): wrk -t2 -c16 -d${duration}s ${MODE:-keepalive}, RUBYOPT=${RUBYOPT:-}"
  grep -E 'Requests/sec' "$out/wrk.txt"
  ruby -I"$(echo "$STACKPROF_GEM_DIR"/gems/stackprof-*/lib)" "$(echo "$STACKPROF_GEM_DIR"/gems/stackprof-*/bin/stackprof)" \
    --text --limit 30 "$STACKPROF_OUT"
  exit 0
fi

wrk -t2 -c16 -d"${duration}s" --latency "${wrk_opts[@]}" "$url" >"$out/wrk.txt" &
wrk_pid=$!
perf record -F 999 -g -p $worker -o "$out/perf.data" -- sleep "$duration" 2>"$out/perf-record.log"
wait $wrk_pid

echo "# narwhal profile: wrk -t2 -c16 -d${duration}s ${MODE:-keepalive}, RUBYOPT=${RUBYOPT:-}"
grep -E 'Requests/sec' "$out/wrk.txt"
echo
echo "## by shared object (self time)"
perf report -i "$out/perf.data" --no-children --sort dso --stdio -g none 2>/dev/null | grep -E '^ +[0-9]' | head -12 || true
echo
echo "## top symbols (self time)"
perf report -i "$out/perf.data" --no-children --sort dso,sym --stdio -g none 2>/dev/null |
  grep -E '^ +[0-9]' | head -40 || true
echo
echo "## system calls and the loopback delivery inside write(2) (inclusive time)"
perf report -i "$out/perf.data" --children --sort sym --stdio -g none 2>/dev/null |
  grep -E '\] (__GI___libc_write|__libc_recv|__x64_sys_[a-z0-9_]+|do_softirq\.part\.0|sock_def_readable)$' | head -15 || true
echo
echo "perf data: $out/perf.data"
