#!/usr/bin/env bash
# User-space instructions a narwhal worker spends per request of
# examples/hello.ru, counted by valgrind's callgrind: unlike req/s or CPU
# time on a shared VM they do not move from one run to the next (0.2 %),
# so a change to the request path shows its cost at once.
#
#   bench/instructions.sh                  # a new connection per request (ab, HTTP/1.0)
#   MODE=keepalive bench/instructions.sh   # kept-alive connections (ab -k)
#   THREADS=5 N=4000 bench/instructions.sh
#   ROOT=../narwhal-before bench/instructions.sh   # another checkout, to compare
#   CONFIG='orca_load_report true' bench/instructions.sh   # more lines for the config file
#
# Starts `narwhal -E production` (one worker) under callgrind, warms it up
# with 200 requests, zeroes the worker's counts, sends N requests with
# `ab -c 4`, and prints instructions per request and the functions that
# spent most of them (self cost). The kernel's work is not counted.
# Needs valgrind and ab (apt-get install -y valgrind apache2-utils); runs
# at about a fiftieth of full speed. Traffic goes to 127.0.0.1 only.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "${ROOT:-$here/..}" && pwd)
n=${N:-2000}
threads=${THREADS:-1}
keepalive=()
[ "${MODE:-close}" = keepalive ] && keepalive=(-k)
out=$(mktemp -d /tmp/narwhal-instructions-XXXXXX)
port=$(ruby -rsocket -e 's = TCPServer.new("127.0.0.1", 0); puts s.addr[1]; s.close')
printf 'worker_processes 1\nthreads %s\n%s\n' "$threads" "${CONFIG:-}" > "$out/config.rb"

cd "$root"
valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$out/cg.%p" \
  ruby -I"$root/lib" "$root/exe/narwhal" -E production -c "$out/config.rb" -l "127.0.0.1:$port" \
  examples/hello.ru >"$out/server.log" 2>&1 </dev/null &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.2; done
ab -q -n 200 -c 4 "${keepalive[@]}" "http://127.0.0.1:$port/" >/dev/null 2>&1
worker=$(pgrep -P $pid | head -1)
callgrind_control -z "$worker" >/dev/null
ab -q -n "$n" -c 4 "${keepalive[@]}" "http://127.0.0.1:$port/" | grep -E "^(Complete|Failed) requests"
callgrind_control -d "$worker" >/dev/null
# the dump is written by the worker itself: wait for it
for _ in $(seq 1 100); do [ -s "$out/cg.$worker.1" ] && break; sleep 0.1; done
ruby "$here/lib/callgrind_self.rb" "$out/cg.$worker.1" "$n"
echo "callgrind data: $out/cg.$worker.1 (callgrind_annotate --inclusive=yes)"
