#!/usr/bin/env bash
# What `distlock serve` costs with many locks held: a throwaway redis-server on a free loopback
# port gets N mutexes (default 10,000) written in lock-redis's layout (the lock key with its
# token and a TTL, the fencing counter, the holder's note: host, pid, note, since), then
# `distlock serve` (release build) is scraped: /metrics and /api/locks, each S times (default
# 20) one second apart with --refresh 1s, so that every request is served by a fresh sweep, as
# a Prometheus scraping every second or an open page would cause. Prints, per request: the
# time (client side), the bytes sent, the sweep's own time (distlock_store_sweep_duration_seconds)
# and the Redis server's CPU (used_cpu_sys + used_cpu_user from INFO, before and after) per
# sweep and as a share of one core at one sweep per second. Everything is stopped by PID.
#
#   bash distlock-cli/scripts/serve-cost.sh [N] [S]   (from the workspace root)
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-10000}
scrapes=${2:-20}

bash scripts/ensure-redis.sh
# DISTLOCK_BIN: another build to measure (e.g. an older one, to compare).
if [ -z "${DISTLOCK_BIN:-}" ]; then
  cargo build --release --quiet -p distlock-cli
fi
bin=${DISTLOCK_BIN:-${CARGO_TARGET_DIR:-target}/release/distlock}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
rport=$(free_port)
sport=$(free_port)
dir=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT

redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
  >"$dir/redis.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.1; done

# The locks, as RESP for redis-cli --pipe: three keys per lock, like a grant with holder
# metadata (`RedisLockBuilder::holder_note`).
python3 - "$n" >"$dir/locks.resp" <<'PY'
import json, os, sys, time
n = int(sys.argv[1])
now = int(time.time() * 1000)
out = sys.stdout.buffer
def cmd(*args):
    args = [a if isinstance(a, bytes) else str(a).encode() for a in args]
    out.write(b"*%d\r\n" % len(args))
    for a in args:
        out.write(b"$%d\r\n%s\r\n" % (len(a), a))
for i in range(n):
    name = f"job-{i % 50}:{i}"
    token = "dl:" + os.urandom(16).hex()
    fence = now * 1000 + i
    note = json.dumps({"host": f"worker-{i % 40}", "pid": 1000 + i, "note": f"batch {i}",
                       "since_ms": now - i * 10})
    cmd("SET", name, token, "PX", 3_600_000)
    cmd("SET", "{%s}:distlock-fence" % name, fence)
    cmd("SET", "{%s}:distlock-note" % name, f"{token}\n{fence}\n{note}", "PX", 3_600_000)
PY
redis-cli -p "$rport" --pipe <"$dir/locks.resp" >/dev/null
echo "== $n locks held ($(redis-cli -p "$rport" dbsize) keys)"

"$bin" --url "redis://127.0.0.1:$rport/" serve --listen "127.0.0.1:$sport" --refresh 1s \
  2>"$dir/serve.log" &
pids+=($!)
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$sport/metrics" -o /dev/null && break; sleep 0.1; done

cpu() { redis-cli -p "$rport" info cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/ {s += $2} END {printf "%.6f", s}'; }

for path in /metrics /api/locks; do
  sleep 1.1
  before=$(cpu)
  start=$(date +%s.%N)
  total=0
  bytes=0
  sweep=0
  for _ in $(seq 1 "$scrapes"); do
    read -r t b < <(curl -s -o /dev/null -w '%{time_total} %{size_download}\n' "http://127.0.0.1:$sport$path")
    total=$(echo "$total + $t" | bc -l)
    bytes=$b
    s=$(curl -s "http://127.0.0.1:$sport/metrics" | awk '/^distlock_store_sweep_duration_seconds / {print $2}')
    sweep=$(echo "$sweep + $s" | bc -l)
    sleep 1.05
  done
  after=$(cpu)
  wall=$(echo "$(date +%s.%N) - $start" | bc -l)
  printf '%-11s %d requests: %.1f ms per request, %d bytes, sweep %.1f ms; redis CPU %.2f ms per sweep, %.2f %% of a core at one sweep per %.2f s\n' \
    "$path" "$scrapes" "$(echo "$total * 1000 / $scrapes" | bc -l)" "$bytes" \
    "$(echo "$sweep * 1000 / $scrapes" | bc -l)" \
    "$(echo "($after - $before) * 1000 / $scrapes" | bc -l)" \
    "$(echo "($after - $before) * 100 / $wall" | bc -l)" "$(echo "$wall / $scrapes" | bc -l)"
done
