#!/usr/bin/env bash
# Renders dashboard.png, the picture of dashboard.json in the README: the dashboard's own
# queries, evaluated by a real Prometheus that scrapes the axum_service example while load.sh
# drives it, drawn by render.py (matplotlib) — not by Grafana, which this machine lacks. Everything listens on loopback and is stopped by
# PID at the end (also on Ctrl-C or error).
#
#   bash examples/axum_service/grafana/render.sh [OUT.png]
#
# Needs `prometheus` (Debian: apt-get install prometheus) and python3 with matplotlib
# (pip install matplotlib). Takes about a minute.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
out="${1:-$here/dashboard.png}"

command -v prometheus >/dev/null || { echo "needs prometheus: apt-get install prometheus" >&2; exit 2; }
python3 -c 'import matplotlib' 2>/dev/null || { echo "needs matplotlib: pip install matplotlib" >&2; exit 2; }
bash scripts/ensure-redis.sh >/dev/null
cargo build --quiet --example axum_service --features axum
target="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"

work="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

# A 300 ms lease renewed every 100 ms and 400 ms of work per request: renewals and, with 16
# clients on 3 orders, waits past the handler's 2 s `wait` (refusals) show on the dashboard.
: >"$work/service.out" # before the service: the loop below reads it at once
"$target/debug/examples/axum_service" --listen 127.0.0.1:0 --work-ms 400 --lease-ms 300 \
    >"$work/service.out" 2>"$work/service.err" &
pids+=($!)
base=""
for _ in $(seq 100); do
    base="$(sed -n 's/^listening on \(http:\/\/127\.0\.0\.1:[0-9]*\)$/\1/p' "$work/service.out")"
    [[ -n "$base" ]] && break
    sleep 0.1
done
[[ -n "$base" ]] || { echo "the service did not start" >&2; cat "$work/service.err" >&2; exit 1; }

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
cat >"$work/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: axum_service
    static_configs:
      - targets: ["${base#http://}"]
YAML
prometheus --config.file "$work/prometheus.yml" --storage.tsdb.path "$work/data" \
    --web.listen-address "127.0.0.1:$port" >"$work/prometheus.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
    curl -sf --max-time 2 "http://127.0.0.1:$port/-/ready" >/dev/null && break
    sleep 0.2
done

start=$(date +%s)
sleep 5
bash examples/axum_service/load.sh --url "$base" --clients 16 --requests 12 --keys 3
sleep 6
end=$(date +%s)
python3 "$here/render.py" "$here/dashboard.json" "http://127.0.0.1:$port" "$start" "$end" "$out"
echo "wrote $out"
