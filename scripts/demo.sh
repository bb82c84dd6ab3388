#!/usr/bin/env bash
# The demo: worker processes contend for one lock on a throwaway redis-server and write to a
# resource that checks fencing tokens. Extra arguments go to the demo (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/ensure-redis.sh
# The first build compiles the workspace and its dependencies in release mode: about 5 minutes
# on 2 cores (cargo shows its progress); later runs start at once.
echo "== building the demo (release mode; the first build takes about 5 minutes on 2 cores)" >&2
cargo build --release --example demo
echo "== running it" >&2
exec cargo run --quiet --release --example demo -- "$@"
