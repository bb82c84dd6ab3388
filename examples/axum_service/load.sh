#!/usr/bin/env bash
# Drives the axum_service example with concurrent requests on a few orders, so that the locks
# are contended, then prints the status codes and the distlock series from /metrics.
#
#   bash examples/axum_service/load.sh [--clients 8] [--requests 40] [--keys 3] [--work-ms 25]
#                                      [--lease-ms 30000] [--backend redis|postgres]
#                                      [--url http://127.0.0.1:PORT]
#
# With --url it drives the service you started (`cargo run --example axum_service --features
# axum` listens on http://127.0.0.1:3000). Without it, it builds and starts its own copy of the
# example, which starts its own throwaway redis-server (or PostgreSQL, with --backend postgres),
# on a free loopback port, and stops it by its PID when done (also on Ctrl-C or error). It sends
# clients × requests POSTs in bounded loops (curl, 10 s timeout each). Set KEEP_METRICS=FILE to keep the full /metrics text.
set -euo pipefail
cd "$(dirname "$0")/../.."

clients=8 requests=40 keys=3 work_ms=25 lease_ms=30000 backend=redis base=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --clients) clients=$2; shift 2 ;;
        --requests) requests=$2; shift 2 ;;
        --keys) keys=$2; shift 2 ;;
        --work-ms) work_ms=$2; shift 2 ;;
        --lease-ms) lease_ms=$2; shift 2 ;;
        --backend) backend=$2; shift 2 ;;
        --url) base=$2; shift 2 ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
case "$base" in
    ""|http://127.*|http://localhost:*) ;;
    *) echo "--url must be a loopback address" >&2; exit 2 ;;
esac

work="$(mktemp -d)"
service_pid=""
cleanup() {
    if [[ -n "$service_pid" ]] && kill -0 "$service_pid" 2>/dev/null; then
        kill -TERM "$service_pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$service_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$service_pid" 2>/dev/null || true
        wait "$service_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

if [[ -z "$base" ]]; then
    case "$backend" in
        redis) bash scripts/ensure-redis.sh >/dev/null ;;
        postgres) bash scripts/ensure-postgres.sh >/dev/null ;;
        *) echo "--backend must be redis or postgres" >&2; exit 2 ;;
    esac
    echo "no --url: building and starting a copy of the service (and its throwaway $backend server)"
    cargo build --quiet --example axum_service --features axum
    target="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
    : >"$work/stdout" # before the service: the loop below reads it at once
    "$target/debug/examples/axum_service" --listen 127.0.0.1:0 --work-ms "$work_ms" \
        --lease-ms "$lease_ms" --backend "$backend" >"$work/stdout" 2>"$work/stderr" &
    service_pid=$!
    for _ in $(seq 100); do
        base="$(sed -n 's/^listening on \(http:\/\/127\.0\.0\.1:[0-9]*\)$/\1/p' "$work/stdout")"
        [[ -n "$base" ]] && break
        kill -0 "$service_pid" 2>/dev/null || { cat "$work/stderr" >&2; exit 1; }
        sleep 0.1
    done
    [[ -n "$base" ]] || { echo "the service did not start" >&2; cat "$work/stderr" >&2; exit 1; }
    echo "service on $base: $clients clients x $requests requests on $keys orders, ${work_ms} ms of work each"
else
    echo "service on $base: $clients clients x $requests requests on $keys orders"
fi

started=$(date +%s%N)
client_pids=()
for c in $(seq "$clients"); do
    (
        for r in $(seq "$requests"); do
            order=$(( (c * 7 + r) % keys ))
            curl -s -o /dev/null -w '%{http_code}\n' --max-time 10 \
                -X POST "$base/orders/$order/settle" || echo "000"
        done >"$work/codes.$c"
    ) &
    client_pids+=($!)
done
wait "${client_pids[@]}"
elapsed_ms=$(( ($(date +%s%N) - started) / 1000000 ))

echo
echo "== responses ($(cat "$work"/codes.* | wc -l) in ${elapsed_ms} ms)"
cat "$work"/codes.* | sort | uniq -c | awk '{ printf "  %s  %6d\n", $2, $1 }'
echo
echo "== orders"
for order in $(seq 0 $((keys - 1))); do
    echo "  $(curl -s --max-time 5 "$base/orders/$order")"
done
curl -s --max-time 5 "$base/metrics" >"$work/metrics"
if [[ -n "${KEEP_METRICS:-}" ]]; then cp "$work/metrics" "$KEEP_METRICS"; fi
echo
echo "== /metrics (distlock series with their descriptions; histograms as count, sum and a few buckets)"
grep -E '^(distlock_|# HELP distlock_)' "$work/metrics" \
    | grep -v -E '_bucket\{.*le="(0\.0005|0\.001|0\.0025|0\.005|0\.01|0\.025|5|10|30|60|300)"' \
    | sed 's/^/  /'
