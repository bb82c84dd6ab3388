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
bash scripts/ensure-seaweedfs.sh
bash scripts/ensure-mariadb.sh
bash scripts/ensure-faketime.sh
bash scripts/ensure-promtool.sh
bash scripts/ensure-chromium.sh

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

# The tests' binaries, built first (the lib, bin and integration-test targets; the examples are
# not: clippy has checked them, and no test runs them as they are).
targets=(--workspace --all-features --lib --bins --tests)
echo "== cargo nextest: building the tests (at ${SECONDS} s)"
cargo nextest run "${targets[@]}" --no-run --cargo-quiet

# Five tests per core: most of a test's time is spent waiting (a lease running out, a server
# starting, a settle period), not computing. On this repository's 2-core VM the 826 tests took
# 181 s at 10 at a time, all green.
threads=$(( $(nproc) * 5 ))
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "== cargo nextest (unit and integration tests, $threads at a time) (at ${SECONDS} s)"
(
    set +e
    cargo nextest run "${targets[@]}" --no-fail-fast --test-threads "$threads" 2>&1
    echo $? >"$work/tests.rc"
) | tee "$work/tests.log" &
tests=$!

# Meanwhile, since the tests leave much of the CPU idle: the docs and their links, the packages
# and the doc tests, one after the other, their output shown when the tests are done. They
# start once nextest has its binaries (its "Starting" line): before, their cargo would hold
# the build directory's lock that nextest's own cargo call is waiting for.
for _ in $(seq 1 600); do
    grep -q '^ *Starting' "$work/tests.log" 2>/dev/null && break
    kill -0 "$tests" 2>/dev/null || break
    sleep 0.2
done
(
    set -euo pipefail
    # The workspace's docs, warnings denied, then lychee (installed if missing) over them and
    # the Markdown files: no broken local link or #fragment. (`scripts/check-links.sh --docsrs`
    # builds them as docs.rs does, before a release.)
    echo "== cargo doc and the links (at ${SECONDS} s)"
    bash scripts/check-links.sh
    # Ready to publish: every publishable crate packaged as crates.io would receive it, and each
    # .crate checked to hold every file its sources include and the license texts (seconds).
    # The verification build of every .crate is `bash scripts/package.sh --verify` (see there
    # why not here).
    echo "== cargo package (at ${SECONDS} s)"
    bash scripts/package.sh
    # The alert rules and the dashboard's queries, by Prometheus' own checker, and the rules'
    # unit tests (each alert fires on its series, with its labels, and not on the others).
    echo "== promtool: alert rules and dashboard queries (at ${SECONDS} s)"
    bash examples/axum_service/check-alerts.sh
    echo "== cargo test --doc (doc tests) (at ${SECONDS} s)"
    cargo test --workspace --all-features --doc
    echo "== docs, links, packages and doc tests done (at ${SECONDS} s)"
) >"$work/side.log" 2>&1 &
side=$!

status=0
wait "$tests" || true
[[ "$(cat "$work/tests.rc" 2>/dev/null)" == 0 ]] || status=1
echo "== the tests are done (at ${SECONDS} s)"
wait "$side" || status=1
cat "$work/side.log"
if [[ $status -ne 0 ]]; then
    echo "== failed (at ${SECONDS} s)"
    exit 1
fi
echo "== all green in ${SECONDS} s"
