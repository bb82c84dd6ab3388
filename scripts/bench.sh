#!/usr/bin/env bash
# The load tool: distlock against the bare-Redis baselines, in one run (about a minute; --quick
# for ~25 s). Installs redis-server (and with it redis-benchmark), valkey-server, etcd and protoc
# if missing, starts throwaway servers on free loopback ports and stops them when done. Writes benches/results/run.json and
# benches/results/chart.svg (the README's chart). Extra arguments go to the tool (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/ensure-redis.sh
# The Valkey columns need valkey-server; the etcd part needs etcd, and the crate's etcd-client
# needs protoc to build at all.
bash scripts/ensure-valkey.sh
bash scripts/ensure-etcd.sh
# The object-storage parts (O1, O2, the takeover, O5) run on a throwaway SeaweedFS.
bash scripts/ensure-seaweedfs.sh
exec cargo run --quiet --release -p distlock-bench --bin loadtool -- "$@"
