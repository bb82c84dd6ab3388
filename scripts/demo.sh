#!/usr/bin/env bash
# The demo: worker processes contend for one lock on a throwaway redis-server (or, with
# `--backend postgres`, a throwaway PostgreSQL; with `--backend etcd`, a throwaway etcd; with
# `--backend s3`, a throwaway SeaweedFS; with `--backend mysql`, a throwaway MariaDB) and
# write to a resource on Redis that checks fencing tokens. Extra arguments go to the demo (try
# --help).
set -euo pipefail
cd "$(dirname "$0")/.."

# Redis holds the counter and the fenced resource whatever the backend.
bash scripts/ensure-redis.sh
# The lock's server binaries (PostgreSQL, etcd, SeaweedFS, MariaDB), when the lock is to live
# there (`--backend NAME` or `--backend=NAME`). A server already running on this machine is
# never used.
backend=redis
prev=""
for arg in "$@"; do
  case "$prev/$arg" in
    --backend/*) backend=$arg ;;
    */--backend=*) backend=${arg#--backend=} ;;
  esac
  prev=$arg
done
# Only the backend asked for is installed and built: the demo is a package of its own
# (examples/demo, `distlock-demo`) whose features add one backend to the Redis it always
# uses, so the Redis demo builds neither lock-postgres nor etcd's gRPC stack (nor needs `protoc`).
features=()
case "$backend" in
  redis) ;;
  postgres) bash scripts/ensure-postgres.sh; features=(--features postgres) ;;
  etcd) bash scripts/ensure-etcd.sh; features=(--features etcd) ;;
  s3) bash scripts/ensure-seaweedfs.sh; features=(--features s3) ;;
  mysql) bash scripts/ensure-mariadb.sh; features=(--features mysql) ;;
  *) echo "demo.sh: unknown backend '$backend' (redis, postgres, etcd, s3, mysql)" >&2; exit 2 ;;
esac
# The first build compiles the demo's dependencies in release mode (cargo shows its progress;
# the README's quick start gives the time it took); later runs start at once.
echo "== building the demo for $backend (release mode; the first build takes a few minutes)" >&2
cargo build --release -p distlock-demo "${features[@]}"
echo "== running it" >&2
exec cargo run --quiet --release -p distlock-demo "${features[@]}" -- "$@"
