#!/usr/bin/env bash
# Everything CI checks: formatting, lints, docs and their links, then every unit, integration
# and doc test. The integration tests start their own redis-server processes (single servers, a
# cluster-enabled node, sentinels) and PostgreSQL servers (initdb in a temporary directory) on
# free loopback ports through lock-testkit and stop them by PID.
#
# Unit and integration tests run under cargo-nextest (installed if missing): one process per
# test, as many at once as the machine has cores, so one slow test (a cluster forming, a lease
# running out) no longer holds back the rest of its binary. Doc tests run under `cargo test
# --doc`, which nextest does not run.
set -euo pipefail
cd "$(dirname "$0")/.."
# The examples read REDIS_URL; the tests start their own servers and must not meet someone's.
unset REDIS_URL
# CI builds from a fresh clone, where incremental compilation's caches only cost time (writing
# them); by hand, after a change, they are what makes the rebuild quick, so they stay on there.
if [[ "${CI:-}" == "true" ]]; then
    export CARGO_INCREMENTAL=0
fi

bash scripts/ensure-redis.sh
bash scripts/ensure-postgres.sh
bash scripts/ensure-valkey.sh
bash scripts/ensure-etcd.sh

if ! cargo nextest --version >/dev/null 2>&1; then
    echo "installing cargo-nextest (crates.io)"
    cargo install --locked --quiet cargo-nextest
fi

echo "== cargo fmt --check (at ${SECONDS} s)"
cargo fmt --all -- --check

# `--all-targets` covers the criterion benches and the examples too: they build, CI does not
# run them.
echo "== cargo clippy (at ${SECONDS} s)"
cargo clippy --workspace --all-targets --all-features -- -D warnings

echo "== cargo doc (at ${SECONDS} s)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --all-features --no-deps --quiet

# The facade's docs as docs.rs builds them, then lychee (installed if missing) over them and the
# Markdown files: no broken local link or #fragment.
bash scripts/check-links.sh

# Ready to publish: every publishable crate packaged as crates.io would receive it, and each
# .crate checked to hold every file its sources include and the license texts (seconds). The
# verification build of every .crate is `bash scripts/package.sh --verify` (see there why not here).
echo "== cargo package (at ${SECONDS} s)"
bash scripts/package.sh

# Three tests per core: most of a test's time is spent waiting (a lease running out, a server
# starting, a settle period), not computing. On this repository's 2-core VM the 811 tests took
# 471 s at 2 at a time, 242-258 s at 4 and 175-193 s at 6, all green in every run.
threads=$(( $(nproc) * 3 ))
echo "== cargo nextest (unit and integration tests, $threads at a time) (at ${SECONDS} s)"
cargo nextest run --workspace --all-features --no-fail-fast --test-threads "$threads"

echo "== cargo test --doc (doc tests) (at ${SECONDS} s)"
cargo test --workspace --all-features --doc
echo "== all green in ${SECONDS} s"
