#!/usr/bin/env bash
# RUSTDOC for `cargo test --doc` in scripts/test.sh: before each crate's doc tests, that crate's
# HTML docs (warnings denied, so a broken intra-doc link fails), from the arguments cargo gives
# rustdoc for the doc tests less the test-only ones, into $DISTLOCK_DOC_OUT.
#
# Why not `cargo doc`: rustdoc needs every dependency's metadata, and `cargo doc` makes it by
# type-checking every dependency again (~190 s of CPU for this workspace, on 2 cores beside the
# tests), while the doc tests' arguments name the libraries the tests' build has just compiled.
# What this leaves out: the binaries' docs (the CLI's, the tools'), which `cargo doc` also
# renders; `bash scripts/check-links.sh` builds everything with `cargo doc`.
set -euo pipefail
real="${DISTLOCK_RUSTDOC:-rustdoc}"

doctest=0
for arg in "$@"; do
    [[ "$arg" == "--test" ]] && doctest=1
done
if [[ "$doctest" == 1 && -n "${DISTLOCK_DOC_OUT:-}" ]]; then
    docs=()
    skip=0
    for arg in "$@"; do
        if [[ "$skip" == 1 ]]; then
            skip=0
            continue
        fi
        case "$arg" in
            --test) ;;
            # An option of the doc tests and its value.
            --test-run-directory | --test-args | --test-builder | --test-builder-wrapper | \
                --runtool | --runtool-arg | --persist-doctests) skip=1 ;;
            --test-run-directory=* | --test-args=* | --test-builder=* | \
                --test-builder-wrapper=* | --runtool=* | --runtool-arg=* | \
                --persist-doctests=*) ;;
            *) docs+=("$arg") ;;
        esac
    done
    "$real" "${docs[@]}" -o "$DISTLOCK_DOC_OUT" --crate-version "${CARGO_PKG_VERSION:-0.0.0}" \
        -D warnings
fi
exec "$real" "$@"
