#!/usr/bin/env bash
# What one acquire + release cycle costs the client, in instructions, counted by valgrind's
# callgrind: repeatable whatever else the machine does, unlike timings on a shared VM. Compares
# distlock's Locker over RedisLock (fenced, and with fencing(false)) with the load tool's
# hand-written redis-rs lock (unfenced and fenced) and rslock 0.10. CLIENTS="hand fenced" counts
# only those. The server side: scripts/script-cost.sh.
#
# Each client runs N and 2N cycles (benches/examples/s1_cycles.rs) under callgrind against a
# throwaway redis-server on a free loopback port; the difference divided by N is the cost of
# one cycle, free of start-up. Needs valgrind and python3; installs redis-server and protoc if
# missing. About a minute.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-2000}
bash scripts/ensure-redis.sh
bash scripts/ensure-etcd.sh # protoc: the bench crate's etcd-client needs it to build
# SERVER=valkey counts the same clients against valkey-server (scripts/ensure-valkey.sh installs
# it, or $DISTLOCK_VALKEY_SERVER), where distlock releases by DELIFEQ instead of the script.
SERVER=${SERVER:-redis}
server_bin=redis-server
if [ "$SERVER" = valkey ]; then
  server_bin=${DISTLOCK_VALKEY_SERVER:-$(command -v valkey-server || echo "${XDG_CACHE_HOME:-$HOME/.cache}/distlock/valkey-9.1.2/valkey-server")}
  [ -x "$server_bin" ] || { echo "client-cost: no valkey-server; run scripts/ensure-valkey.sh" >&2; exit 1; }
fi
for tool in valgrind "$server_bin" python3; do
  command -v "$tool" >/dev/null || { echo "client-cost: $tool is missing" >&2; exit 1; }
done
cargo build --quiet --release -p distlock-bench --example s1_cycles
# Where cargo put it: `CARGO_TARGET_DIR`, a `build.target-dir` setting or ./target.
target_dir="$(cargo metadata --format-version 1 --no-deps \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
binary="$target_dir/release/examples/s1_cycles"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$server_bin" --port "$port" --bind 127.0.0.1 --save '' --appendonly no >/dev/null 2>&1 &
server=$!
work=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 1 50); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done

count() { # count <client> <cycles>: instructions of one run
  valgrind --tool=callgrind --callgrind-out-file="$work/out" \
    "$binary" "redis://127.0.0.1:$port/" "$1" "$2" >/dev/null 2>&1
  awk '/^(summary|totals):/ {print $2; exit}' "$work/out"
}

echo "Client instructions per acquire + release cycle on $SERVER (callgrind, N=$N):"
for client in ${CLIENTS:-hand handfenced rslock unfenced fenced}; do
  one=$(count "$client" "$N")
  two=$(count "$client" $((2 * N)))
  printf '%-10s %8d\n' "$client" $(((two - one) / N))
done
