#!/usr/bin/env bash
# What `distlock serve` costs with many locks held. A throwaway server on a free loopback port
# gets N mutexes (default 10,000), each written as a grant with its holder's note (host, pid,
# note, since), then `distlock serve` (release build) is scraped: /metrics and /api/locks, each
# S times (default 20) one second apart with --refresh 1s, so that every request is served by a
# fresh sweep, as a Prometheus scraping every second or an open page would cause. Prints, per
# request: the time (client side), the bytes sent, the sweep's own time
# (distlock_store_sweep_duration_seconds), and the server's CPU per sweep and as a share of one
# core at one sweep per second. Everything is stopped by PID.
#
# --backend redis (the default): a redis-server, the locks in lock-redis's layout (the lock key
# with its token and a TTL, the fencing counter, the note key); the server's CPU is
# used_cpu_sys + used_cpu_user from INFO, before and after.
#
# --backend postgres: a PostgreSQL cluster (initdb in a temporary directory, its own socket
# directory, pg_stat_statements preloaded), `distlock migrate`, the locks in lock-postgres's
# lease table (a `distlock_leases` row and a `distlock_notes` row each, one INSERT … SELECT
# generate_series), then VACUUM ANALYZE, as autovacuum would have done on a table that size.
# The server's CPU is the summed utime + stime (/proc/PID/stat) of the postmaster and its
# processes alive both before and after (the console's pooled connection, the background
# workers; not the script's own short psql sessions); the statements' own time is the delta of
# pg_stat_statements' total_exec_time (every statement but the script's reads of it): the
# executor's wall time, sending the rows included, so above the CPU on a loaded machine. With
# SERVE_COST_EXPLAIN=1 it then prints the plans (EXPLAIN ANALYZE, by auto_explain) of one more
# sweep's statements.
#
#   bash distlock-cli/scripts/serve-cost.sh [--backend redis|postgres] [N] [S]
#   (from the workspace root; DISTLOCK_BIN=path measures another build)
set -euo pipefail
cd "$(dirname "$0")/../.."

backend=redis
positional=()
while [ $# -gt 0 ]; do
  case "$1" in
    --backend) backend=${2:?--backend needs redis or postgres}; shift 2 ;;
    --backend=*) backend=${1#--backend=}; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit 0 ;;
    *) positional+=("$1"); shift ;;
  esac
done
case "$backend" in
  redis|postgres) ;;
  *) echo "error: --backend must be redis or postgres, not $backend" >&2; exit 2 ;;
esac
n=${positional[0]:-10000}
scrapes=${positional[1]:-20}

bash "scripts/ensure-$backend.sh"
# DISTLOCK_BIN: another build to measure (e.g. an older one, to compare).
if [ -z "${DISTLOCK_BIN:-}" ]; then
  cargo build --release --quiet -p distlock-cli
fi
bin=${DISTLOCK_BIN:-${CARGO_TARGET_DIR:-target}/release/distlock}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
sport=$(free_port)
dir=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  # The server's files go only once it has exited (bounded: 10 s).
  for pid in "${pids[@]}"; do
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  done
  rm -rf "$dir"
}
trap cleanup EXIT

# ---- Redis ----------------------------------------------------------------------------------

start_redis() {
  rport=$(free_port)
  redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
    >"$dir/redis.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.1; done
  url="redis://127.0.0.1:$rport/"

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
  echo "== $n locks held on Redis ($(redis-cli -p "$rport" dbsize) keys)"
}

# Redis's CPU so far, in seconds.
redis_cpu() { redis-cli -p "$rport" info cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/ {s += $2} END {printf "%.6f", s}'; }

# ---- PostgreSQL -----------------------------------------------------------------------------

# As root, initdb and postgres run as the unprivileged user the distribution's package creates
# (as lock-testkit's PostgresServer does); setpriv execs, so `$!` is the postmaster's PID.
pg_user=${DISTLOCK_PG_USER:-postgres}
as_pg=()
if [ "$(id -u)" -eq 0 ]; then
  as_pg=(setpriv --reuid="$pg_user" --regid="$pg_user" --init-groups --)
fi

start_postgres() {
  local bindir
  bindir=${DISTLOCK_PG_BINDIR:-$(pg_config --bindir 2>/dev/null || true)}
  if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
    bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  fi
  pport=$(free_port)
  pgdir="$dir/pg"
  mkdir -p "$pgdir/sock"
  if [ "$(id -u)" -eq 0 ]; then chown -R "$pg_user:" "$pgdir"; chmod 755 "$dir"; fi
  (cd "$pgdir" && "${as_pg[@]}" "$bindir/initdb" -D "$pgdir/data" --username=postgres --encoding=UTF8 \
    --no-locale --no-sync --auth=trust --no-instructions) >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
  (cd "$pgdir" && exec "${as_pg[@]}" "$bindir/postgres" -D "$pgdir/data" -p "$pport" \
    -c listen_addresses=127.0.0.1 -c unix_socket_directories="$pgdir/sock" \
    -c fsync=off -c full_page_writes=off -c max_connections=50 \
    -c shared_preload_libraries=pg_stat_statements,auto_explain -c pg_stat_statements.track=top) \
    >"$dir/postgres.log" 2>&1 &
  pgpid=$!
  pids+=("$pgpid")
  # Ready when our postmaster says so in postmaster.pid (its PID on line 1, `ready` on line 8).
  for _ in $(seq 1 300); do
    if [ "$(sed -n 1p "$pgdir/data/postmaster.pid" 2>/dev/null)" = "$pgpid" ] \
      && [ "$(sed -n 8p "$pgdir/data/postmaster.pid" 2>/dev/null | tr -d ' ')" = ready ]; then
      break
    fi
    kill -0 "$pgpid" 2>/dev/null || { cat "$dir/postgres.log" >&2; exit 1; }
    sleep 0.1
  done
  url="postgres://postgres@127.0.0.1:$pport/postgres"
  "$bin" --url "$url" migrate >/dev/null

  # The locks: a lease row each (a live token, a fencing token, an expiry an hour away) and the
  # note its token wrote beside it (`PostgresLock::annotate`), in one statement.
  psql_q -v n="$n" <<'SQL' >/dev/null
CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
WITH leases AS (
    INSERT INTO distlock_leases (name, token, fencing_token, expires_at)
    SELECT format('job-%s:%s', i % 50, i), md5(random()::text || i),
        (extract(epoch FROM clock_timestamp()) * 1000)::int8 * 1000 + i,
        clock_timestamp() + interval '1 hour'
    FROM generate_series(0, :n - 1) AS i
    RETURNING name, token)
INSERT INTO distlock_notes (name, token, note)
SELECT name, token, convert_to(json_build_object(
        'host', 'worker-' || (i % 40), 'pid', 1000 + i, 'note', 'batch ' || i,
        'since_ms', (extract(epoch FROM now()) * 1000)::int8 - i * 10)::text, 'UTF8')
FROM (SELECT name, token, split_part(name, ':', 2)::int AS i FROM leases) l;
VACUUM ANALYZE distlock_leases;
VACUUM ANALYZE distlock_notes;
SELECT pg_stat_statements_reset();
SQL
  echo "== $n locks held on PostgreSQL ($(psql_q -c 'SELECT count(*) FROM distlock_leases') lease rows, $(psql_q -c 'SELECT count(*) FROM distlock_notes') notes)"
}

psql_q() { psql -X -q -t -A -v ON_ERROR_STOP=1 -h "$pgdir/sock" -p "$pport" -U postgres postgres "$@"; }

# "PID TICKS" (utime + stime, in clock ticks) of the postmaster and each of its children.
pg_ticks() {
  local pid
  for pid in "$pgpid" $(awk -v p="$pgpid" '$4 == p {print $1}' /proc/[0-9]*/stat 2>/dev/null); do
    awk '{print $1, $14 + $15}' "/proc/$pid/stat" 2>/dev/null || true
  done
}

# The CPU seconds between two pg_ticks outputs, over the processes in both.
pg_cpu_between() {
  awk -v hz="$(getconf CLK_TCK)" 'NR == FNR {t[$1] = $2; next} ($1 in t) {s += $2 - t[$1]} END {printf "%.6f", s / hz}' "$1" "$2"
}

# The statements' execution time so far (pg_stat_statements), in milliseconds.
pg_exec_ms() { psql_q -c "SELECT coalesce(sum(total_exec_time), 0) FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'"; }

# ---- The measurement ------------------------------------------------------------------------

"start_$backend"

"$bin" --url "$url" serve --listen "127.0.0.1:$sport" --refresh 1s 2>"$dir/serve.log" &
pids+=($!)
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$sport/metrics" -o /dev/null && break; sleep 0.1; done

metric() { curl -s "http://127.0.0.1:$sport/metrics" | awk -v m="$1" '$1 == m {print $2}'; }

# Before and after each series: the server's CPU (seconds) and, on PostgreSQL, the statements'
# time (ms).
mark() { # FILE-PREFIX
  case "$backend" in
    redis) redis_cpu >"$1.cpu" ;;
    postgres) pg_ticks >"$1.ticks"; pg_exec_ms >"$1.exec" ;;
  esac
}

for path in /metrics /api/locks; do
  # This read may sweep; every request below then finds the snapshot older than --refresh and
  # sweeps, and the reads of the sweep's figures right after it are served from its snapshot:
  # between the two marks, the store sees exactly the requests' sweeps.
  sweeps_before=$(metric distlock_store_sweeps_total)
  sleep 1.1
  mark "$dir/before"
  total=0
  bytes=0
  sweep=0
  sweeps_after=$sweeps_before
  for _ in $(seq 1 "$scrapes"); do
    read -r t b < <(curl -s -o /dev/null -w '%{time_total} %{size_download}\n' "http://127.0.0.1:$sport$path")
    total=$(echo "$total + $t" | bc -l)
    bytes=$b
    read -r s sweeps_after < <(curl -s "http://127.0.0.1:$sport/metrics" \
      | awk '$1 == "distlock_store_sweep_duration_seconds" {d = $2} $1 == "distlock_store_sweeps_total" {n = $2} END {print d, n}')
    sweep=$(echo "$sweep + $s" | bc -l)
    sleep 1.05
  done
  mark "$dir/after"
  sweeps=$(( sweeps_after - sweeps_before ))
  case "$backend" in
    redis) cpu=$(echo "$(cat "$dir/after.cpu") - $(cat "$dir/before.cpu")" | bc -l); extra="" ;;
    postgres)
      cpu=$(pg_cpu_between "$dir/before.ticks" "$dir/after.ticks")
      exec_ms=$(echo "$(cat "$dir/after.exec") - $(cat "$dir/before.exec")" | bc -l)
      procs=$(awk 'NR == FNR {t[$1]; next} ($1 in t) {k++} END {print k + 0}' "$dir/before.ticks" "$dir/after.ticks")
      extra=$(printf '; statements %.2f ms per sweep (pg_stat_statements); CPU over %d processes' "$(echo "$exec_ms / $sweeps" | bc -l)" "$procs")
      ;;
  esac
  printf '%-11s %d requests, %d sweeps: %.1f ms per request, %d bytes, sweep %.1f ms; %s CPU %.2f ms per sweep, %.2f %% of a core at one sweep per second%s\n' \
    "$path" "$scrapes" "$sweeps" "$(echo "$total * 1000 / $scrapes" | bc -l)" "$bytes" \
    "$(echo "$sweep * 1000 / $scrapes" | bc -l)" "$backend" \
    "$(echo "$cpu * 1000 / $sweeps" | bc -l)" \
    "$(echo "$cpu * 100 / $sweeps" | bc -l)" "$extra"
done

if [ "$backend" = postgres ]; then
  echo "== the statements, by total time (pg_stat_statements, both series)"
  psql_q -F ' | ' -c "SELECT calls, round(total_exec_time::numeric, 1) AS total_ms,
      round(mean_exec_time::numeric, 2) AS mean_ms, rows,
      left(regexp_replace(query, '\s+', ' ', 'g'), 70)
    FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'
    ORDER BY total_exec_time DESC LIMIT 6"
  # SERVE_COST_EXPLAIN=1: the plans of one more sweep's statements, as the console sent them
  # (auto_explain, preloaded but off until now, turned on with a reload, which reaches the
  # console's pooled connection too), from the server's log.
  if [ -n "${SERVE_COST_EXPLAIN:-}" ]; then
    psql_q >/dev/null <<'SQL'
ALTER SYSTEM SET auto_explain.log_min_duration = 0;
ALTER SYSTEM SET auto_explain.log_analyze = on;
ALTER SYSTEM SET auto_explain.log_buffers = on;
SELECT pg_reload_conf();
SQL
    sleep 1.1
    lines=$(wc -l <"$dir/postgres.log")
    curl -s -o /dev/null "http://127.0.0.1:$sport/api/locks"
    echo "== the plans of one sweep's statements (auto_explain, EXPLAIN ANALYZE BUFFERS)"
    tail -n +"$((lines + 1))" "$dir/postgres.log" | grep -v 'pg_stat_statements\|^\s*$'
  fi
fi
