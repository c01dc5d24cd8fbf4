"""Replay the stored judge's re-measures on recorded main jobs: which third attempts
`pytest_mxperf.case.stored.settled_regression` would not take, and whether any of them came
within the case's threshold (a pass the rule would have left to a paired run).

Reads JSON reports (``--mxperf-json``) of runs judged against stored baselines, such as
``scripts/host_cost.py --keep DIR``'s ``host.json`` and ``loss.json``; only cases whose best of
their first two attempts was beyond their threshold count (the rule applies to a suspected
regression, not to a re-measure of blocks spread too far to judge). The floor is
``--tolerance`` (the run's ``--mxperf-tolerance``, 0.05 by default).

    python scripts/replay_attempts.py DIR/host.json DIR/loss.json [--tolerance 0.05]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pytest_mxperf.case.stored import settled_regression


def replay(case: dict[str, Any], tolerance: float) -> tuple[bool, bool] | None:
    """``(settled after two attempts, the third attempt within the threshold)`` of a case whose
    first two attempts were a suspected regression, with a third on record; else None."""
    attempts = case.get("attempts") or []
    verdict = case.get("verdict") or {}
    base, threshold = verdict.get("baseline_images_per_sec"), verdict.get("threshold")
    if len(attempts) < 3 or not base or threshold is None:
        return None
    clears_at = base * (1 - threshold)
    bests = [attempts[0], max(attempts[:2])]
    if bests[-1] >= clears_at:
        return None  # not a regressed best: re-measured for its blocks' spread
    return settled_regression(bests, tolerance, clears_at), attempts[2] >= clears_at


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--tolerance", type=float, default=0.05)
    args = parser.parse_args()
    settled = within = kept = 0
    for path in args.reports:
        for case in json.loads(path.read_text())["cases"]:
            found = replay(case, args.tolerance)
            if found is None:
                continue
            base = case["verdict"]["baseline_images_per_sec"]
            changes = " ".join(f"{a / base - 1:+.1%}" for a in case["attempts"][:3])
            label = "not taken" if found[0] else "taken"
            note = " (came within the threshold)" if found[1] else ""
            print(f"{path}: {case['key']}: {changes}: third attempt {label}{note}")
            settled += found[0]
            within += found[0] and found[1]
            kept += not found[0]
    print(
        f"suspected regressions with a third attempt on record: {settled + kept}; "
        f"the rule leaves out {settled} (of which {within} came within the threshold), "
        f"keeps {kept}"
    )


if __name__ == "__main__":
    main()
