#!/usr/bin/env bash
# The longest product functions and files, against the limits of the house (a function at most
# 80 lines, a file at most 600).
#
#   scripts/sizes.sh            top 10 of each over the product crates
#   scripts/sizes.sh -n 20      top 20
#   scripts/sizes.sh --tools    benches/src and torture/src as well (tools, not product)
#   scripts/sizes.sh --over     every function and file over the limits (exit 1 if any)
#   scripts/sizes.sh DIR...     these folders instead of the product crates
#
# What is counted: the `.rs` files under each crate's `src/`. Tests are left out: `tests/`
# folders, `#[cfg(test)] mod x { ... }` blocks, and the files of `#[cfg(test)] mod x;`. Generated
# code would be left out too; the product crates have none (their `include_str!`s are Lua, SQL
# and Markdown, not Rust).
#
# A function runs from its `fn` line to its closing brace, found by matching braces with
# comments, strings, raw strings and char literals blanked out (a lifetime is not a char). A
# declaration without a body (`fn f();`) is not a function here. A file's length is its lines
# less those of its test blocks.
set -euo pipefail

cd "$(dirname "$0")/.."

top=10
tools=0
over=0
dirs=()
while [ $# -gt 0 ]; do
    case "$1" in
        -n) top="$2"; shift 2 ;;
        --tools) tools=1; shift ;;
        --over) over=1; shift ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) dirs+=("$1"); shift ;;
    esac
done
if [ ${#dirs[@]} -eq 0 ]; then
    dirs=(lock-core/src lock-redis/src lock-redlock/src lock-postgres/src lock-etcd/src lock-mysql/src lock-object-store/src
          lock-macros/src distlock-cli/src src)
    if [ "$tools" = 1 ]; then
        dirs+=(benches/src torture/src)
    fi
fi

exec python3 - "$top" "$over" "${dirs[@]}" <<'PY'
import os
import re
import sys

top, over_only, dirs = int(sys.argv[1]), sys.argv[2] == "1", sys.argv[3:]
FN_LIMIT, FILE_LIMIT = 80, 600


def blank(src):
    """The source with comments, strings and char literals replaced by spaces (newlines kept),
    so that only code braces remain."""
    out = []
    i, n = 0, len(src)

    def keep_newlines(text):
        return "".join("\n" if c == "\n" else " " for c in text)

    while i < n:
        c = src[i]
        two = src[i:i + 2]
        if two == "//":
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif two == "/*":
            depth, j = 1, i + 2
            while j < n and depth:
                if src[j:j + 2] == "/*":
                    depth, j = depth + 1, j + 2
                elif src[j:j + 2] == "*/":
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(keep_newlines(src[i:j]))
            i = j
        elif (m := re.match(r'(?:b|c)?r(#*)"', src[i:i + 260])) and not (
            i > 0 and (src[i - 1].isalnum() or src[i - 1] == "_")
        ):
            end = '"' + m.group(1)
            j = src.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(keep_newlines(src[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            j += 1
            out.append(keep_newlines(src[i:j]))
            i = j
        elif c == "'":
            # A char literal ('x', '\n', '\'', '\u{7f}', '{') or a lifetime ('a, 'static).
            if src[i + 1:i + 2] == "\\":
                j = src.find("'", i + 3)
                j = n if j < 0 else j + 1
            elif src[i + 2:i + 3] == "'":
                j = i + 3
            else:
                j = i + 1
            out.append(" " * (j - i) if j > i + 1 else "'")
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def line_of(starts, pos):
    """The 0-based line of offset `pos`, given the offsets where lines start."""
    lo, hi = 0, len(starts) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if starts[mid] <= pos:
            lo = mid
        else:
            hi = mid - 1
    return lo


def closing(code, open_at):
    """The offset of the brace that closes the one at `open_at`."""
    depth = 0
    for j in range(open_at, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1


def body_start(code, at):
    """From a `fn` keyword: the offset of the body's `{`, or None for a declaration (`;`)."""
    depth = 0
    for j in range(at, len(code)):
        c = code[j]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif depth == 0 and c == ";":
            return None
        elif depth == 0 and c == "{":
            return j
    return None


FN = re.compile(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)")
TEST_MOD = re.compile(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*([{;])")


def measure(path, test_files):
    src = open(path, encoding="utf-8").read()
    code = blank(src)
    starts = [0] + [m.end() for m in re.finditer("\n", code)]
    lines = len(src.splitlines())
    test_ranges = []
    for m in TEST_MOD.finditer(code):
        if m.group(2) == "{":
            end = closing(code, m.end() - 1)
            test_ranges.append((m.start(), end))
        else:
            # `#[cfg(test)] mod x;`: x.rs beside a mod.rs/lib.rs/main.rs, else in the folder
            # named after this file.
            base = os.path.dirname(path)
            stem = os.path.splitext(os.path.basename(path))[0]
            if stem not in ("mod", "lib", "main"):
                base = os.path.join(base, stem)
            for cand in (os.path.join(base, m.group(1) + ".rs"), os.path.join(base, m.group(1), "mod.rs")):
                test_files.add(os.path.normpath(cand))
    in_tests = lambda pos: any(a <= pos <= b for a, b in test_ranges)
    test_lines = sum(line_of(starts, b) - line_of(starts, a) + 1 for a, b in test_ranges)
    fns = []
    for m in FN.finditer(code):
        if in_tests(m.start()):
            continue
        open_at = body_start(code, m.end())
        if open_at is None:
            continue
        first, last = line_of(starts, m.start()), line_of(starts, closing(code, open_at))
        fns.append((last - first + 1, f"{path}:{first + 1}", m.group(1)))
    return lines - test_lines, fns


files, fns, test_files = [], [], set()
paths = []
for d in dirs:
    for root, subdirs, names in os.walk(d):
        subdirs[:] = sorted(s for s in subdirs if s not in ("tests", "target"))
        paths += [os.path.normpath(os.path.join(root, f)) for f in sorted(names) if f.endswith(".rs")]
measured = [(p, measure(p, test_files)) for p in paths]
for path, (length, in_file) in measured:
    if path in test_files:
        continue
    files.append((length, path))
    fns += in_file

fns.sort(key=lambda f: (-f[0], f[1]))
files.sort(key=lambda f: (-f[0], f[1]))
long_fns = [f for f in fns if f[0] > FN_LIMIT]
long_files = [f for f in files if f[0] > FILE_LIMIT]
if over_only:
    print(f"functions over {FN_LIMIT} lines: {len(long_fns)}")
    for length, where, name in long_fns:
        print(f"  {length:5}  {name:32} {where}")
    print(f"files over {FILE_LIMIT} lines: {len(long_files)}")
    for length, path in long_files:
        print(f"  {length:5}  {path}")
    sys.exit(1 if long_fns or long_files else 0)
print(f"{len(files)} files, {len(fns)} functions in: {' '.join(dirs)}")
print(f"top {top} functions by lines (limit {FN_LIMIT}; over it: {len(long_fns)})")
for length, where, name in fns[:top]:
    print(f"  {length:5}  {name:32} {where}")
print(f"top {top} files by lines, test blocks aside (limit {FILE_LIMIT}; over it: {len(long_files)})")
for length, path in files[:top]:
    print(f"  {length:5}  {path}")
PY
