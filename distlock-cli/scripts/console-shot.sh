#!/usr/bin/env bash
# The README's picture of `distlock serve` (distlock-cli/docs/console.png): a throwaway
# redis-server on a free loopback port, a few locks of every kind held (mutexes and an election
# by `distlock run` processes, a waiter, a semaphore and a read-write lock written in
# lock-redis's layout), one held past --stuck-after, the console served, and a screenshot taken
# by headless Chromium. Everything is stopped by PID.
#
#   bash distlock-cli/scripts/console-shot.sh [OUT.png]   (from the workspace root)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-distlock-cli/docs/console.png}
bash scripts/ensure-redis.sh
bash scripts/ensure-chromium.sh
cargo build --release --quiet -p distlock-cli
bin=${CARGO_TARGET_DIR:-target}/release/distlock

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
rport=$(free_port)
sport=$(free_port)
url="redis://127.0.0.1:$rport/"
dir=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  sleep 0.5
  rm -rf "$dir"
}
trap cleanup EXIT

redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
  >"$dir/redis.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.1; done

hold() { # NAME NOTE [run flags...]
  local name=$1 note=$2; shift 2
  "$bin" --url "$url" run --lease 15s --note "$note" "$@" "$name" -- sleep 600 >/dev/null 2>&1 &
  pids+=($!)
}
# The stuck one first: held past --stuck-after by the time of the picture.
hold billing:nightly-export "nightly export, cron 02:00"
sleep 12
hold orders:reindex "reindex orders shard 3"
hold cache:warmup:eu-west "warm product cache"
"$bin" --url "$url" run --leader --value "scheduler-2 (10.0.3.12)" --lease 15s scheduler -- sleep 600 \
  >/dev/null 2>&1 &
pids+=($!)
sleep 1
# A second process waits for orders:reindex.
"$bin" --url "$url" run --wait 10m orders:reindex -- true >/dev/null 2>&1 &
pids+=($!)
# A semaphore (3 of 5 permits, two holders) and a read-write lock's writer, in lock-redis's
# layout, with the server's clock for the expiries.
now=$(redis-cli -p "$rport" time | head -1)
exp=$(( (now + 600) * 1000 ))
redis-cli -p "$rport" zadd "{pool:db}:distlock-permits" "$exp" dl:0f1e2d3c4b5a69788796a5b4c3d2e1f0 "$exp" dl:8a7b6c5d4e3f201f2e3d4c5b6a798877 >/dev/null
redis-cli -p "$rport" hset "{pool:db}:distlock-permit-counts" max 5 used 3 dl:0f1e2d3c4b5a69788796a5b4c3d2e1f0 2 dl:8a7b6c5d4e3f201f2e3d4c5b6a798877 1 >/dev/null
redis-cli -p "$rport" set "{config:pricing}:distlock-writer" dl:5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b px 20000 >/dev/null
redis-cli -p "$rport" set "{config:pricing}:distlock-fence" "$(( now * 1000000 ))" >/dev/null

"$bin" --url "$url" serve --listen "127.0.0.1:$sport" --stuck-after 10s 2>"$dir/serve.log" &
pids+=($!)
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$sport/api/locks" -o /dev/null && break; sleep 0.1; done
sleep 2
mkdir -p "$(dirname "$out")"
timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$dir/profile" --window-size=1280,560 --hide-scrollbars \
  --virtual-time-budget=2500 --screenshot="$out" "http://127.0.0.1:$sport/" 2>/dev/null
echo "wrote $out"
