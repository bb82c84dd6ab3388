#!/usr/bin/env bash
# What the PostgreSQL fence costs a write transaction: pgbench's throughput of
#   BEGIN; UPDATE acct ...; COMMIT;                                   (plain)
#   BEGIN; SELECT distlock_fence('acct:<id>', 42); UPDATE acct ...; COMMIT;   (fenced)
# with one resource (every transaction writes account 1) and with 100 (a random one of 100),
# from 1 client and from CLIENTS (default 8), each run SECONDS_PER_RUN long (default 10 s), the plain and
# fenced runs alternating, REPEAT times (default 3; the best of each is reported). The token is
# the same every time: one holder writing many times (an equal token is accepted).
#
# A third script adds `SELECT 1` in place of the fence: what one more statement's round trip
# costs by itself. Last, the server's own time per transaction (a loop inside the server, no
# round trips), plain and fenced.
#
# Against a throwaway server: initdb in a temporary directory, a free loopback port, the schema
# from lock-postgres/sql/migration.sql (what `migrate` installs), stopped at the end by its own
# data directory. Settings as lock-testkit's test servers (fsync off), so commits are cheap and
# the fence's share is, if anything, overstated. Needs pgbench and python3 (for a free port).
#   bash scripts/pg-fence-cost.sh            # about 6 minutes
#   SECONDS_PER_RUN=5 REPEAT=1 bash scripts/pg-fence-cost.sh
set -euo pipefail
cd "$(dirname "$0")/.."

RUN=${SECONDS_PER_RUN:-10}
CLIENTS=${CLIENTS:-8}
REPEAT=${REPEAT:-3}
bash scripts/ensure-postgres.sh >/dev/null
bindir=$(pg_config --bindir 2>/dev/null || dirname "$(command -v initdb)")
[ -x "$bindir/initdb" ] || bindir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
command -v pgbench >/dev/null || { echo "pg-fence-cost: pgbench is missing" >&2; exit 1; }

work=$(mktemp -d)
as=()
if [ "$(id -u)" -eq 0 ]; then
  chown postgres "$work"
  as=(runuser -u postgres --)
fi
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${as[@]}" "$bindir/initdb" -D "$work/data" -U postgres --auth=trust >/dev/null
"${as[@]}" "$bindir/pg_ctl" -D "$work/data" -l "$work/log" -w start \
  -o "-p $port -k $work -c listen_addresses=127.0.0.1 -c fsync=off" >/dev/null
trap '"${as[@]}" "$bindir/pg_ctl" -D "$work/data" -m fast stop >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

psql=(psql -X -q -h 127.0.0.1 -p "$port" -U postgres -v ON_ERROR_STOP=1)
"${psql[@]}" -f lock-postgres/sql/migration.sql >/dev/null
"${psql[@]}" -c "CREATE TABLE acct (id int PRIMARY KEY, balance int8 NOT NULL);
  INSERT INTO acct SELECT g, 0 FROM generate_series(1, 100) g;"

cat >"$work/plain1.sql" <<'SQL'
BEGIN;
UPDATE acct SET balance = balance + 1 WHERE id = 1;
COMMIT;
SQL
cat >"$work/fenced1.sql" <<'SQL'
BEGIN;
SELECT distlock_fence('acct:1', 42);
UPDATE acct SET balance = balance + 1 WHERE id = 1;
COMMIT;
SQL
cat >"$work/extra1.sql" <<'SQL'
BEGIN;
SELECT 1;
UPDATE acct SET balance = balance + 1 WHERE id = 1;
COMMIT;
SQL
cat >"$work/extra100.sql" <<'SQL'
\set id random(1, 100)
BEGIN;
SELECT 1;
UPDATE acct SET balance = balance + 1 WHERE id = :id;
COMMIT;
SQL
cat >"$work/plain100.sql" <<'SQL'
\set id random(1, 100)
BEGIN;
UPDATE acct SET balance = balance + 1 WHERE id = :id;
COMMIT;
SQL
cat >"$work/fenced100.sql" <<'SQL'
\set id random(1, 100)
BEGIN;
SELECT distlock_fence('acct:' || :id, 42);
UPDATE acct SET balance = balance + 1 WHERE id = :id;
COMMIT;
SQL
chmod a+r "$work"/*.sql

tps() { # tps <script> <clients>
  pgbench -n -h 127.0.0.1 -p "$port" -U postgres -f "$work/$1.sql" -c "$2" -j "$(( $2 < 2 ? 1 : 2 ))" \
    -T "$RUN" postgres 2>/dev/null | awk '/^tps/ {print int($3); exit}'
}

printf '%-10s %-8s %10s %10s %10s %14s %16s\n' resources clients plain '+SELECT 1' fenced fenced/plain 'fenced/+SELECT 1'
for resources in 1 100; do
  for clients in 1 "$CLIENTS"; do
    best_plain=0 best_extra=0 best_fenced=0
    for _ in $(seq 1 "$REPEAT"); do
      p=$(tps "plain$resources" "$clients"); e=$(tps "extra$resources" "$clients")
      f=$(tps "fenced$resources" "$clients")
      [ "$p" -gt "$best_plain" ] && best_plain=$p
      [ "$e" -gt "$best_extra" ] && best_extra=$e
      [ "$f" -gt "$best_fenced" ] && best_fenced=$f
    done
    ratios=$(python3 -c "print(f'{$best_fenced / $best_plain:.2f} {$best_fenced / $best_extra:.2f}')")
    printf '%-10s %-8s %10s %10s %10s %14s %16s\n' "$resources" "$clients" "$best_plain" \
      "$best_extra" "$best_fenced" ${ratios}
  done
done

# The server's own time per transaction, without round trips or the client: N transactions in
# a loop inside the server (a DO block that commits each), plain and fenced, twice each.
N=20000
for _ in 1 2; do
  for kind in plain fenced; do
    fence=""
    [ "$kind" = fenced ] && fence="PERFORM distlock_fence('acct:1', 42);"
    "${psql[@]}" -c "DO \$\$ DECLARE t0 timestamptz := clock_timestamp(); BEGIN
      FOR i IN 1..$N LOOP $fence UPDATE acct SET balance = balance + 1 WHERE id = 1; COMMIT;
      END LOOP;
      RAISE NOTICE 'server time per $kind transaction: % us',
        round(extract(epoch FROM clock_timestamp() - t0) * 1000000 / $N, 1); END \$\$;" 2>&1 \
      | sed -n 's/.*NOTICE: *//p'
  done
done
"${psql[@]}" -At -c "SELECT 'fence records: ' || count(*) FROM distlock_fences"
