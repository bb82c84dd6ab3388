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

# No debug info for the workspace's crates either (the dependencies have none, Cargo.toml):
# a failing test still prints where it panicked (file and line), only its backtrace's frames
# lose their lines. The line tables cost 45 s of the tests' build's CPU (rebuilding every
# crate of the workspace: 344 s of CPU with them, 299 s without) and make every test binary
# larger. Exported for the whole script: the profile is part of what cargo compares to reuse a
# build, so the doc tests must see the same one. By hand, `cargo test` keeps the line tables.
export CARGO_PROFILE_DEV_DEBUG=false

work="$(mktemp -d)"
# The tests' servers (PostgreSQL, MariaDB, etcd, SeaweedFS, Redis) keep their data in a
# temporary directory of the run's own on a RAM-backed file system where there is one: on this
# repository's VM, /tmp's ext4 (mounted with `discard`) cost the tests ~50 s of system CPU more,
# mostly creating and deleting the files of a few hundred PostgreSQL data directories (the
# template's copies). World-writable and sticky like /tmp: the servers run as another user
# when the tests run as root.
servers_tmp=""
if [[ -d /dev/shm && -w /dev/shm ]]; then
    servers_tmp="$(mktemp -d /dev/shm/distlock-tests.XXXXXX)"
    chmod 1777 "$servers_tmp"
fi
trap 'rm -rf "$work" ${servers_tmp:+"$servers_tmp"}' EXIT

# What the build needs: protoc (etcd-client's build script) and cargo-nextest.
bash scripts/ensure-protoc.sh
if ! cargo nextest --version >/dev/null 2>&1; then
    echo "installing cargo-nextest (crates.io)"
    cargo install --locked --quiet cargo-nextest
fi

# The servers and tools only the tests need are installed meanwhile, in the background: their
# downloads and unpacking (a minute on a fresh machine) wait on the network and the disk while
# the compiler keeps both cores busy. Their output is shown before the tests start.
(
    set -euo pipefail
    for what in redis postgres valkey etcd seaweedfs mariadb faketime promtool chromium; do
        bash "scripts/ensure-$what.sh"
    done
) >"$work/install.log" 2>&1 &
installs=$!

echo "== cargo fmt --check (at ${SECONDS} s)"
cargo fmt --all -- --check
# The store-protocol mutants (scripts/mutants.sh, VERIFICATION.md §4.1) still find their text.
python3 scripts/mutants/run.py --check .

# Clippy lints while the tests build, not in a pass of its own: cargo runs clippy-driver (a
# rustc with clippy's lints) for the workspace's own crates, as `cargo clippy` does, through
# RUSTC_WORKSPACE_WRAPPER and CLIPPY_ARGS (cargo-clippy's way of passing `-- -D warnings` to
# it). The dependencies are compiled once, by rustc, for the tests; a separate `cargo clippy`
# pass type-checked every one of them again (~190 s of the test command's ~880). The build
# covers every target `--all-targets` does (the examples and benches too), so this lints what
# `cargo clippy --workspace --all-targets --all-features -- -D warnings` lints. Exported for
# the whole script: the wrapper is part of what cargo compares to reuse a build, so the tests'
# run, the docs and the doc tests must see the same one. Without clippy-driver (a toolchain
# without the clippy component), the separate pass.
clippy_driver="$(rustc --print sysroot)/bin/clippy-driver"
if [[ -x "$clippy_driver" ]]; then
    export RUSTC_WORKSPACE_WRAPPER="$clippy_driver"
    export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
else
    echo "== cargo clippy (at ${SECONDS} s)"
    cargo clippy --workspace --all-targets --all-features -- -D warnings
fi

# The tests' binaries, built first, with every other target (the examples and the criterion
# benches: they build and are linted; CI does not run them).
targets=(--workspace --all-features --lib --bins --tests)
echo "== cargo nextest: building the tests, the examples and the benches, with clippy's lints (at ${SECONDS} s)"
# Two compiler processes per core, not one: a rustc spends much of its time in its
# single-threaded front end, and cargo's default of one job per core left the 2-core VM ~30 %
# idle over the build (a fresh build of the same code: 438 s at 2 jobs, 395 s at 4).
cargo nextest run --workspace --all-features --all-targets --no-run --cargo-quiet \
    --jobs "$(( $(nproc) * 2 ))"

echo "== the servers and tools the tests need (at ${SECONDS} s)"
wait "$installs" || { cat "$work/install.log"; echo "== installing failed (at ${SECONDS} s)"; exit 1; }
cat "$work/install.log"

# Five tests per core: most of a test's time is spent waiting (a lease running out, a server
# starting, a settle period), not computing, so the phase lasts about the sum of the tests' own
# times over the threads (2,200 s / 10 on this repository's 2-core VM, 230 s, at 1.7 cores).
# Six per core saturated both cores: the phase took longer (244 s) and two timing checks
# failed under the load. DISTLOCK_TESTS_PER_CORE overrides it.
threads=$(( $(nproc) * ${DISTLOCK_TESTS_PER_CORE:-5} ))
echo "== cargo nextest (unit and integration tests, $threads at a time) (at ${SECONDS} s)"
(
    set +e
    TMPDIR="${servers_tmp:-${TMPDIR:-/tmp}}" \
        cargo nextest run "${targets[@]}" --no-fail-fast --test-threads "$threads" 2>&1
    echo $? >"$work/tests.rc"
) | tee "$work/tests.log" &
tests=$!

# Meanwhile: the doc tests and the docs, their links, the packages, one after the other, their
# output shown when the tests are done. They start once nextest has its binaries (its "Starting" line): before, their cargo would hold
# the build directory's lock that nextest's own cargo call is waiting for.
for _ in $(seq 1 600); do
    grep -q '^ *Starting' "$work/tests.log" 2>/dev/null && break
    kill -0 "$tests" 2>/dev/null || break
    sleep 0.2
done
(
    set -euo pipefail
    # The doc tests, and beside each crate's, its docs (warnings denied: a broken intra-doc
    # link fails) made by rustdoc from the same arguments (scripts/lib/rustdoc-docs.sh): the
    # libraries the tests' build compiled, where `cargo doc` would type-check every dependency
    # once more. Each workspace library's folder is made first, so that rustdoc links to the
    # docs of a crate whose turn comes later (it links only to folders that exist).
    target_dir="$(cargo metadata --format-version 1 --no-deps | python3 -c '
import json, sys
meta = json.load(sys.stdin)
print(meta["target_directory"])
for package in meta["packages"]:
    for target in package["targets"]:
        if {"lib", "proc-macro"} & set(target["kind"]):
            print(target["name"].replace("-", "_"))
' | { read -r dir; while read -r lib; do mkdir -p "$dir/doc/$lib"; done; echo "$dir"; })"
    echo "== cargo test --doc (doc tests) and the docs (at ${SECONDS} s)"
    DISTLOCK_DOC_OUT="$target_dir/doc" RUSTDOC="$PWD/scripts/lib/rustdoc-docs.sh" \
        cargo test --workspace --all-features --doc
    # lychee (installed if missing) over the docs and the Markdown files: no broken local link
    # or #fragment. (`scripts/check-links.sh` alone builds them with `cargo doc`, the
    # binaries' too; `--docsrs` as docs.rs does, before a release.)
    echo "== the links (at ${SECONDS} s)"
    bash scripts/check-links.sh --built
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
    echo "== doc tests, docs, links, packages done (at ${SECONDS} s)"
) >"$work/side.log" 2>&1 &
side=$!

status=0
wait "$tests" || true
[[ "$(cat "$work/tests.rc" 2>/dev/null)" == 0 ]] || status=1
echo "== the tests are done (at ${SECONDS} s)"
wait "$side" || status=1
cat "$work/side.log"
# The rotating sample of the store-protocol mutants (VERIFICATION.md §4.1): one mutant a day,
# applied in place and put back, its crate's tests rebuilt incrementally and its checks run;
# the sample must be killed. 40–70 s; after the tests and the side jobs, so no build of theirs
# sees the mutant. DISTLOCK_MUTANT=ID picks one; DISTLOCK_MUTANT_SAMPLE=0 skips it.
if [[ $status -eq 0 && "${DISTLOCK_MUTANT_SAMPLE:-1}" != 0 ]]; then
    echo "== a store-protocol mutant, today's of the rotating sample (at ${SECONDS} s)"
    TMPDIR="${servers_tmp:-${TMPDIR:-/tmp}}" python3 scripts/mutants/run.py --sample . || status=1
fi
if [[ $status -ne 0 ]]; then
    echo "== failed (at ${SECONDS} s)"
    exit 1
fi
echo "== all green in ${SECONDS} s"
