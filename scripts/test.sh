#!/usr/bin/env bash
# Everything CI checks: formatting, lints, then every unit, integration and doc test. The
# integration tests start their own redis-server processes (single servers, a cluster-enabled
# node) and PostgreSQL servers (initdb in a temporary directory) on free loopback ports through
# lock-testkit and stop them by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
# The examples read REDIS_URL; the tests start their own servers and must not meet someone's.
unset REDIS_URL

bash scripts/ensure-redis.sh
bash scripts/ensure-postgres.sh

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy"
cargo clippy --workspace --all-targets --all-features -- -D warnings

echo "== cargo check --benches (the criterion benches build; CI does not run them)"
cargo check --benches --workspace --all-features

echo "== cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --all-features --no-deps --quiet

# The facade's docs as docs.rs builds them, then lychee (installed if missing) over them and the
# Markdown files: no broken local link or #fragment.
bash scripts/check-links.sh

echo "== cargo test (unit, integration and doc tests)"
cargo test --workspace --all-features
