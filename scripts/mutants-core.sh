#!/usr/bin/env bash
# `cargo mutants` over lock-core's policy — the Locker (`locker/`), its runtime (`runtime/`) and
# elections (`election/`) — with lock-core's own tests, then the score (issue 50;
# VERIFICATION.md §4.2). What is mutated and how the tests run is in .cargo/mutants.toml; the
# mutants argued equivalent are in scripts/mutants/core-equivalent.txt.
#
#   bash scripts/mutants-core.sh                 # every mutant (about 90 minutes on 2 cores)
#   bash scripts/mutants-core.sh --iterate       # only those not caught by the last run
#   bash scripts/mutants-core.sh -F 'pace.rs'    # cargo-mutants' own filters pass through
#
# Not part of the test command: it rebuilds lock-core for each of ~700 mutants. It installs
# cargo-mutants if missing. Exits 1 when a mutant survives that is not argued equivalent.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo-mutants >/dev/null || cargo install --locked cargo-mutants
out=${DISTLOCK_MUTANTS_OUT:-target/mutants-core}
export CARGO_PROFILE_DEV_DEBUG=false
# Three at a time: while one builds, the others' tests mostly wait on lock-core's paused clock.
# cargo-mutants exits 2 when a mutant is missed; the score below says which and whether argued.
cargo mutants -p lock-core -j "${DISTLOCK_MUTANTS_JOBS:-3}" --timeout 45 -o "$out" "$@" || true
exec python3 scripts/mutants/core_score.py "$out/mutants.out"
