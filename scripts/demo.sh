#!/usr/bin/env bash
# The demo: worker processes contend for one lock on a throwaway redis-server (or, with
# `--backend postgres`, a throwaway PostgreSQL; with `--backend etcd`, a throwaway etcd) and
# write to a resource on Redis that checks fencing tokens. Extra arguments go to the demo (try
# --help).
set -euo pipefail
cd "$(dirname "$0")/.."

# Redis holds the counter and the fenced resource whatever the backend.
bash scripts/ensure-redis.sh
# PostgreSQL's server binaries or etcd, when the lock is to live there (`--backend postgres`,
# `--backend=postgres`, `--backend etcd`, `--backend=etcd`). A server already running on this
# machine is never used.
backend=redis
prev=""
for arg in "$@"; do
  case "$prev/$arg" in
    --backend/*) backend=$arg ;;
    */--backend=*) backend=${arg#--backend=} ;;
  esac
  prev=$arg
done
case "$backend" in
  postgres) bash scripts/ensure-postgres.sh ;;
  etcd) bash scripts/ensure-etcd.sh ;;
esac
# The demo is built with lock-etcd whatever the backend, and building it needs `protoc`, which
# ensure-etcd.sh installs (with an etcd server) where it is missing.
if ! command -v protoc >/dev/null 2>&1; then
  bash scripts/ensure-etcd.sh
fi
# The first build compiles the workspace and its dependencies in release mode: about 5 minutes
# on 2 cores (cargo shows its progress); later runs start at once.
echo "== building the demo (release mode; the first build takes about 5 minutes on 2 cores)" >&2
cargo build --release --example demo
echo "== running it" >&2
exec cargo run --quiet --release --example demo -- "$@"
