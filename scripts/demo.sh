#!/usr/bin/env bash
# The demo: worker processes contend for one lock on a throwaway redis-server and write to a
# resource that checks fencing tokens. Extra arguments go to the demo (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/ensure-redis.sh
exec cargo run --quiet --release --example demo -- "$@"
