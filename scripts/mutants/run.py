"""Runs the mutants of mutants.py in the scratch tree given (see scripts/mutants.sh); with
`--check [tree]`, only checks that each mutant's text is still where it says."""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from mutants import MUTANTS  # noqa: E402

# Every check run is bounded: a mutant that hangs a check counts as killed when nextest's own
# slow-test timeout ends it, and the whole run of one mutant is cut at this many seconds.
PER_MUTANT_SECONDS = 900


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
        packages = [a for p in re.findall(r"package\(([^)]+)\)", checks) for a in ("-p", p)]
        try:
            outcome = subprocess.run(
                ["cargo", "nextest", "run", *packages, "--all-features", "-E", checks,
                 "--no-fail-fast", "--test-threads", "4", "--cargo-quiet"],
                cwd=tree, capture_output=True, text=True, timeout=PER_MUTANT_SECONDS,
            )
            log = outcome.stdout + outcome.stderr
            failed = sorted(set(re.findall(r"FAIL \[[^\]]*\] +(?:\(\s*\d+/\d+\) )?(\S+ \S+)", log)))
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


if __name__ == "__main__":
    if sys.argv[1:2] == ["--check"]:
        sys.exit(check(Path(sys.argv[2] if len(sys.argv) > 2 else ".")))
    sys.exit(run(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else ""))
