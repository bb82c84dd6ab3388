#!/usr/bin/env bash
# The demo: worker processes contend for one lock on a throwaway redis-server (or, with
# `--backend postgres`, a throwaway PostgreSQL) and write to a resource on Redis that checks
# fencing tokens. Extra arguments go to the demo (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."

# Redis holds the counter and the fenced resource whatever the backend.
bash scripts/ensure-redis.sh
# PostgreSQL's server binaries, when the lock is to live there (`--backend postgres` or
# `--backend=postgres`). A server already running on this machine is never used.
prev=""
for arg in "$@"; do
  if [ "$arg" = "--backend=postgres" ] || { [ "$prev" = "--backend" ] && [ "$arg" = "postgres" ]; }; then
    bash scripts/ensure-postgres.sh
    break
  fi
  prev=$arg
done
# The first build compiles the workspace and its dependencies in release mode: about 5 minutes
# on 2 cores (cargo shows its progress); later runs start at once.
echo "== building the demo (release mode; the first build takes about 5 minutes on 2 cores)" >&2
cargo build --release --example demo
echo "== running it" >&2
exec cargo run --quiet --release --example demo -- "$@"
