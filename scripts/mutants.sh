#!/usr/bin/env bash
# Applies each store-protocol mutant of scripts/mutants/mutants.py, one at a time, in a scratch
# worktree of HEAD (its own build directory), runs the checks that should notice, and prints
# the score: killed (the checks failed) or survived. The working tree is never touched.
#
#   bash scripts/mutants.sh              # every mutant
#   bash scripts/mutants.sh redis-       # the mutants whose id starts with `redis-`
#
# Each mutant costs a rebuild of its crate's tests and a run of its checks (a minute or two on a
# 2-core machine): the whole list takes a while, so it is not part of the test command.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
scratch=$(mktemp -d "${TMPDIR:-/tmp}/distlock-mutants.XXXXXX")
git worktree add --quiet --detach "$scratch/tree" HEAD
cleanup() { git -C "$root" worktree remove --force "$scratch/tree" >/dev/null 2>&1 || true; rm -rf "$scratch"; }
trap cleanup EXIT
export CARGO_TARGET_DIR="${DISTLOCK_MUTANTS_TARGET:-$root/target/mutants}"
export CARGO_PROFILE_DEV_DEBUG=false
# Not `exec`: the scratch worktree is removed on the way out (the trap).
python3 "$root/scripts/mutants/run.py" "$scratch/tree" "${1:-}"
