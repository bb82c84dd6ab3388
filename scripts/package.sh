#!/usr/bin/env bash
# Packages every publishable crate as crates.io would receive it (`cargo package --workspace`:
# metadata, license files, README, every path dependency with a version, the workspace's crates
# resolved against each other through cargo's local registry overlay), then checks each `.crate`
# on its own: every file its sources include (`include_str!`, `include_bytes!`: the READMEs that
# are crate docs, the Lua scripts, the SQL migration) and both license texts are inside it.
#
#   bash scripts/package.sh            the packages and the check (seconds; scripts/test.sh runs it)
#   bash scripts/package.sh --verify   also cargo's verification build of every .crate (before a
#                                      release: each crate builds alone from its .crate)
#
# Why the test command does not run the verification build: each crate is verified with its own
# features, so none of its dependency builds is shared with the test builds. Measured from a
# fresh clone on this repository's 2-core VM: 190 s of a 10-minute test command, for a check
# whose usual failure (a file the sources include left out of the package) the include check
# below finds in seconds.
# lock-testkit, the benches, the torture suite, the models and the demo are `publish = false`, so left
# out.
set -euo pipefail
cd "$(dirname "$0")/.."

verify=(--no-verify)
if [[ "${1:-}" == "--verify" ]]; then
    verify=()
fi
# Offline first: each package's lock file is then resolved from the registry index cargo already
# has (the build just used it), where going online first asked crates.io's index about every
# dependency again: 18 s against 1.8 s on this repository's VM, at the test command's tail. Online
# when the local index cannot resolve it (a dependency never fetched on this machine).
package=(cargo package --workspace --quiet --allow-dirty "${verify[@]}"
    --exclude lock-testkit --exclude distlock-bench --exclude distlock-torture
    --exclude distlock-models --exclude distlock-demo)
offline_log="$(mktemp)"
trap 'rm -f "$offline_log"' EXIT
if ! "${package[@]}" --offline 2>"$offline_log"; then
    echo "cargo package --offline could not resolve from the local index; online:"
    sed 's/^/  /' "$offline_log"
    "${package[@]}"
fi

python3 - <<'EOF'
import json, posixpath, re, subprocess, sys, tarfile

meta = json.loads(subprocess.check_output(
    ["cargo", "metadata", "--no-deps", "--format-version", "1"]))
target = meta["target_directory"]
include = re.compile(r'include_(?:str|bytes)!\(\s*"([^"]+)"\s*\)')
problems, checked = [], 0
for package in meta["packages"]:
    if package["publish"] == []:
        continue
    name, version = package["name"], package["version"]
    root = f"{name}-{version}"
    with tarfile.open(f"{target}/package/{root}.crate") as crate:
        files = {member.name for member in crate.getmembers() if member.isfile()}
        for license in ("LICENSE-MIT", "LICENSE-APACHE"):
            if f"{root}/{license}" not in files:
                problems.append(f"{name}: {license} is not in the package")
        for path in sorted(files):
            if not path.endswith(".rs"):
                continue
            text = crate.extractfile(path).read().decode("utf-8", "replace")
            # A file included only for the doc tests (`#[cfg(doctest)]`: the facade tests
            # lock-macros' REFERENCE.md) is not needed to build the package.
            text = re.sub(r'#\[cfg\(doctest\)\]\s*#\[doc = include_str!\([^)]*\)\]', "", text)
            for wanted in include.findall(text):
                found = posixpath.normpath(posixpath.join(posixpath.dirname(path), wanted))
                if found not in files:
                    problems.append(f"{name}: {path} includes {wanted}, not in the package")
        checked += 1
for problem in problems:
    print(problem, file=sys.stderr)
if problems:
    sys.exit(1)
print(f"{checked} packages: every included file and both license texts are inside")
EOF
