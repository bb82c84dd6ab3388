#!/usr/bin/env bash
# The README's picture of the demo's workers in `distlock serve`
# (distlock-cli/docs/console-demo.png): a throwaway redis-server on a free loopback port, the
# demo (scripts/demo.sh's binary) run on it, `distlock serve` over it, /api/locks read a few
# times during the run (printed: who holds demo:ledger, how long for, the waiters), and a
# screenshot taken by headless Chromium. Everything is stopped by PID.
#
# With the demo's defaults (2 ms of work per hold, 500 ms leases, every 25th hold a stall past
# its lease) a sweep finds demo:ledger held almost every time, mostly by a stalled holder (the
# stalls are most of the time the lock is held), and by another worker at each sweep; the
# workers describe themselves (`holder_note("demo worker-N")`), so the page names them.
# DEMO_ARGS adds the demo's flags (e.g. "--hold-ms 400 --ttl-ms 1000 --pause-every 0").
#
#   bash distlock-cli/scripts/demo-shot.sh [OUT.png]   (from the workspace root)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-distlock-cli/docs/console-demo.png}
read -r -a demo_args <<<"${DEMO_ARGS:-}"
bash scripts/ensure-redis.sh
bash scripts/ensure-chromium.sh
cargo build --release --quiet -p distlock-cli
# The demo's binary, as scripts/demo.sh builds it (run directly here, so that its PID is ours).
cargo build --release --quiet -p distlock-demo
tgt=${CARGO_TARGET_DIR:-target}/release
bin=$tgt/distlock

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
rport=$(free_port)
sport=$(free_port)
url="redis://127.0.0.1:$rport/"
dir=$(mktemp -d)
pids=()
cleanup() {
  # SIGINT: the demo then stops its workers (by PID) and reports.
  for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill "$pid" 2>/dev/null || true
  done
  rm -rf "$dir"
}
trap cleanup EXIT

redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
  >"$dir/redis.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.1; done

"$bin" --url "$url" serve --listen "127.0.0.1:$sport" --stuck-after 2s 2>"$dir/serve.log" &
pids+=($!)
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$sport/api/locks" -o /dev/null && break; sleep 0.1; done

"$tgt/demo" --redis-url "$url" --duration 30 "${demo_args[@]}" >"$dir/demo.log" 2>&1 &
demo=$!
pids+=("$demo")
sleep 3

# What the console sees: demo:ledger's holder (masked token), hold age, TTL, waiters.
echo "== /api/locks during the run (one line per request, 0.7 s apart)"
for _ in $(seq 1 10); do
  curl -s "http://127.0.0.1:$sport/api/locks" | python3 -c '
import json, sys
d = json.load(sys.stdin)
held = [l for l in d["locks"] if l["name"] == "demo:ledger"]
if not held:
    print("demo:ledger not held at the sweep (sweep_ms %s)" % d["sweep_ms"])
for l in held:
    h = l["holder"]
    print("%s %s by %s (pid %s, %s) token %s held_for_ms %s ttl_ms %s fencing_token %s waiters %s" % (
        l["name"], l["kind"], h["host"], h["pid"], h["note"], l["token"], l["held_for_ms"],
        l["ttl_ms"], l["fencing_token"], l["waiters"]))'
  sleep 0.7
done

mkdir -p "$(dirname "$out")"
timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$dir/profile" --window-size=1280,400 --hide-scrollbars \
  --virtual-time-budget=2500 --screenshot="$out" "http://127.0.0.1:$sport/" 2>/dev/null
echo "wrote $out"
kill -0 "$demo" 2>/dev/null && echo "(the demo was still running: the picture is of its workers live)"
