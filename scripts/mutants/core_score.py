#!/usr/bin/env python3
"""The score of a `cargo mutants` run over lock-core's policy (VERIFICATION.md §4.2).

    python3 scripts/mutants/core_score.py OUT_DIR [EQUIVALENTS]

OUT_DIR is cargo-mutants' `mutants.out`; EQUIVALENTS (default
scripts/mutants/core-equivalent.txt) lists the missed mutants argued equivalent, one per line
as cargo-mutants names them, each followed by `  # why`. A mutant is caught when a test failed
or it timed out (a hang is noticed); unviable ones (that do not compile) are not counted. The
score is caught over caught + missed, the equivalents left out. Exits 1 when a missed mutant
is neither killed nor argued equivalent.
"""

import json
import sys
from pathlib import Path


def equivalents(path: Path) -> dict[str, str]:
    """Each equivalent mutant's name and its reason."""
    argued = {}
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, _, why = line.partition("  # ")
        argued[name.strip()] = why.strip()
    return argued


def main() -> int:
    out = Path(sys.argv[1])
    default = Path(__file__).with_name("core-equivalent.txt")
    argued = equivalents(Path(sys.argv[2]) if len(sys.argv) > 2 else default)
    outcomes = json.loads((out / "outcomes.json").read_text())["outcomes"]
    counts = {"caught": 0, "timeout": 0, "missed": 0, "unviable": 0}
    missed = []
    for outcome in outcomes:
        scenario = outcome["scenario"]
        if not isinstance(scenario, dict) or "Mutant" not in scenario:
            continue  # the baseline
        summary = outcome["summary"]
        name = scenario["Mutant"]["name"]
        if summary == "CaughtMutant":
            counts["caught"] += 1
        elif summary == "Timeout":
            counts["timeout"] += 1
        elif summary == "Unviable":
            counts["unviable"] += 1
        elif summary == "MissedMutant":
            counts["missed"] += 1
            missed.append(name)
    equivalent = [m for m in missed if m in argued]
    survivors = [m for m in missed if m not in argued]
    caught = counts["caught"] + counts["timeout"]
    judged = caught + len(survivors)
    score = 100.0 * caught / judged if judged else 100.0
    print(
        f"{sum(counts.values())} mutants: {counts['caught']} caught, {counts['timeout']} timed out "
        f"(caught), {counts['missed']} missed ({len(equivalent)} argued equivalent), "
        f"{counts['unviable']} unviable"
    )
    print(f"score: {caught} of {judged} caught = {score:.1f} %")
    for name in survivors:
        print(f"SURVIVED {name}")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
