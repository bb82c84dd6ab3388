"""Runs the mutants of mutants.py in the scratch tree given (see scripts/mutants.sh); with
`--check [tree]`, only checks that each mutant's text is still where it says; with
`--sample [tree]`, runs today's one mutant of the rotating sample in that tree, in place (what
the test command does, after its tests)."""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from mutants import KNOWN_SURVIVORS, MUTANTS  # noqa: E402

# Every check run is bounded: a mutant that hangs a check counts as killed when nextest's own
# slow-test timeout ends it, and the whole run of one mutant is cut at this many seconds.
PER_MUTANT_SECONDS = 900


def packages_of(checks: str) -> list:
    """`-p PACKAGE` for each package a nextest filter names: only those are built."""
    return [a for p in re.findall(r"package\(([^)]+)\)", checks) for a in ("-p", p)]


def failed_checks(log: str) -> list:
    """The checks nextest's output says failed (`binary test` names)."""
    return sorted(set(re.findall(r"FAIL \[[^\]]*\] +(?:\(\s*\d+/\d+\) )?(\S+ \S+)", log)))


def run(tree: Path, only: str) -> int:
    chosen = [m for m in MUTANTS if m[0].startswith(only)]
    if not chosen:
        print(f"no mutant's id starts with {only!r}", file=sys.stderr)
        return 2
    results = []
    logs = Path(os.environ.get("CARGO_TARGET_DIR", "target")) / "mutant-logs"
    for mid, file, before, after, checks, rule in chosen:
        path = tree / file
        text = path.read_text()
        if text.count(before) < 1:
            results.append((mid, "STALE", 0.0, rule, checks))
            print(f"{mid}: the text to change is not in {file} any more", flush=True)
            continue
        path.write_text(text.replace(before, after, 1))
        started = time.monotonic()
        # Only the package the checks are in is built (its tests and what they need).
        packages = packages_of(checks)
        try:
            outcome = subprocess.run(
                ["cargo", "nextest", "run", *packages, "--all-features", "-E", checks,
                 "--no-fail-fast", "--test-threads", "4", "--cargo-quiet"],
                cwd=tree, capture_output=True, text=True, timeout=PER_MUTANT_SECONDS,
            )
            log = outcome.stdout + outcome.stderr
            failed = failed_checks(log)
            if outcome.returncode == 0:
                verdict = "SURVIVED"
            elif failed:
                verdict = "killed by " + ", ".join(name.split(" ")[-1] for name in failed)
            else:
                # Not a check's failure (a build error, no test matched): no verdict.
                verdict = "ERROR (see the log)"
        except subprocess.TimeoutExpired as timeout:
            log = str(timeout)
            verdict = "killed (timeout)"
        finally:
            path.write_text(text)
        logs.mkdir(parents=True, exist_ok=True)
        (logs / f"{mid}.log").write_text(log)
        seconds = time.monotonic() - started
        results.append((mid, verdict, seconds, rule, checks))
        print(f"{mid}: {verdict} in {seconds:.0f} s", flush=True)
    killed = sum(1 for r in results if r[1].startswith("killed"))
    print()
    print("| mutant | rule it breaks | checks | verdict | time |")
    print("|---|---|---|---|---|")
    for mid, verdict, seconds, rule, checks in results:
        print(f"| {mid} | {rule} | `{checks}` | {verdict} | {seconds:.0f} s |")
    print(f"\n{killed} of {len(results)} mutants killed")
    return 0 if killed == len(results) else 1


def check(tree: Path) -> int:
    """Whether every mutant's text is still in its file (a refactor that moves it makes the
    mutant STALE, which only a full run would notice): what the test command runs."""
    stale = [(mid, file) for mid, file, before, *_ in MUTANTS
             if before not in (tree / file).read_text()]
    for mid, file in stale:
        print(f"mutant {mid}: the text it changes is not in {file} any more "
              f"(update scripts/mutants/mutants.py)", file=sys.stderr)
    return 1 if stale else 0


def sample(tree: Path) -> int:
    """The rotating sample the test command runs: one mutant a day (the UTC day's number
    modulo the number of mutants not known to survive, or `DISTLOCK_MUTANT=ID`), applied *in place* in `tree` (so the
    rebuild is the test build's own, incremental), its checks run, and the file put back
    whatever happens (the change is refused if the file has changes of its own). Exit 0 when
    the checks kill it."""
    import datetime
    import signal

    wanted = os.environ.get("DISTLOCK_MUTANT")
    if wanted:
        chosen = [m for m in MUTANTS if m[0] == wanted]
        if not chosen:
            print(f"no mutant {wanted!r}", file=sys.stderr)
            return 2
        mid, file, before, after, checks, rule = chosen[0]
    else:
        day = datetime.datetime.now(datetime.timezone.utc).date().toordinal()
        pool = [m for m in MUTANTS if m[0] not in KNOWN_SURVIVORS]
        mid, file, before, after, checks, rule = pool[day % len(pool)]
    path = tree / file
    dirty = subprocess.run(["git", "diff", "--quiet", "--", file], cwd=tree).returncode != 0
    if dirty:
        print(f"mutant {mid}: {file} has changes of its own; not mutated", file=sys.stderr)
        return 2
    text = path.read_text()

    def put_back(*_args):
        path.write_text(text)
        sys.exit(130)

    # A SIGTERM or Ctrl-C mid-run still puts the file back (the `finally` below, or this).
    signal.signal(signal.SIGTERM, put_back)
    started = time.monotonic()
    packages = packages_of(checks)
    try:
        path.write_text(text.replace(before, after, 1))
        outcome = subprocess.run(
            ["cargo", "nextest", "run", *packages, "--all-features", "--test", "it",
             "-E", checks, "--no-fail-fast", "--cargo-quiet"],
            cwd=tree, capture_output=True, text=True, timeout=PER_MUTANT_SECONDS,
        )
    finally:
        path.write_text(text)
    log = outcome.stdout + outcome.stderr
    failed = failed_checks(log)
    seconds = time.monotonic() - started
    if outcome.returncode != 0 and failed:
        names = ", ".join(name.split(" ")[-1] for name in failed)
        print(f"mutant {mid} ({rule}): killed by {names} in {seconds:.0f} s")
        return 0
    if outcome.returncode == 0:
        print(f"mutant {mid} ({rule}): SURVIVED its checks `{checks}` ({seconds:.0f} s)")
    else:
        print(f"mutant {mid}: no check failed, the run did ({seconds:.0f} s):\n{log[-3000:]}")
    return 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--sample"]:
        sys.exit(sample(Path(sys.argv[2] if len(sys.argv) > 2 else ".")))
    if sys.argv[1:2] == ["--check"]:
        sys.exit(check(Path(sys.argv[2] if len(sys.argv) > 2 else ".")))
    sys.exit(run(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else ""))
