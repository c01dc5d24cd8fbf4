"""A/A check of whole-case turns: is there a bias between the sides of identical code?

Reads the JSON reports (``--mxperf-json``) of paired runs of identical code (``--mxperf-ab
HEAD``) and, for every case its sides ran alone in two or more whole-case turns a round (input
pipelines, end-to-end training: `pytest_mxperf.case.wholeturns`), prints the mean log ratio
HEAD/REV over its turn pairs, its standard error and z; then the same over all such cases, and
how much faster a side's second turn runs than its first (a warm process: the same on both
sides, so ABBA leaves it out of the ratio). For identical code, |z| above 2.58 in more than about
1 case in 100 says the sides differ by more than their code, and the interval, which assumes
they do not, would raise false alarms::

    for i in 1 2 3; do pytest --mxperf tests/perf/test_pipelines.py --mxperf-ab HEAD \\
        --mxperf-json aa-turns$i.json; done
    python scripts/turn_bias.py aa-turns*.json
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any


def turn_pairs(report: dict[str, Any]) -> dict[str, list[tuple[list[float], list[float]]]]:
    """Per case key, the (REV turns, HEAD turns) img/s of each round where both sides ran it in
    two or more turns."""
    out: dict[str, list[tuple[list[float], list[float]]]] = defaultdict(list)
    for rnd in (report.get("paired") or {}).get("rounds", []):
        rev_blocks = (rnd.get("rev") or {}).get("blocks", {})
        head_blocks = (rnd.get("head") or {}).get("blocks", {})
        for key, rev in rev_blocks.items():
            head = head_blocks.get(key)
            ra, rb = rev.get("turns"), (head or {}).get("turns")
            if ra and rb and len(ra) == len(rb) >= 2:
                out[key].append((list(ra), list(rb)))
    return out


def mean_se(values: list[float]) -> tuple[float, float]:
    n = len(values)
    mean = math.fsum(values) / n
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in values) / (n - 1)) if n > 1 else math.inf
    return mean, sd / math.sqrt(n)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", nargs="+", type=Path, help="JSON reports of A/A paired runs")
    args = parser.parse_args()
    cases: dict[str, list[tuple[list[float], list[float]]]] = defaultdict(list)
    for path in args.reports:
        try:
            report = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise SystemExit(f"{path}: not a JSON report ({exc})") from None
        for key, rounds in turn_pairs(report).items():
            cases[key] += rounds
    if not cases:
        raise SystemExit("no case was run in whole-case turns on both sides in these reports")
    every: list[float] = []
    warm: list[float] = []
    flagged = 0
    for key in sorted(cases):
        logs = [math.log(b / a) for rev, head in cases[key] for a, b in zip(rev, head)]
        warm += [math.log(side[1] / side[0]) for rev, head in cases[key] for side in (rev, head)]
        every += logs
        if len(logs) < 2:
            print(f"{key}: {len(logs)} pair(s), too few")
            continue
        mean, se = mean_se(logs)
        z = mean / se if se > 0 else 0.0
        flagged += abs(z) > 2.58
        print(
            f"{key}: HEAD/REV {math.expm1(mean):+.1%} (SE {se:.1%}, "
            f"{len(logs)} pairs in {len(cases[key])} rounds, z {z:+.2f})"
        )
    mean, se = mean_se(every)
    print(
        f"all {len(cases)} case(s): HEAD/REV {math.expm1(mean):+.1%} (SE {se:.1%}, "
        f"{len(every)} pairs, z {mean / se:+.2f}); |z| > 2.58 in {flagged} case(s)"
    )
    w, wse = mean_se(warm)
    print(f"a side's second turn against its first: {math.expm1(w):+.1%} (SE {wse:.1%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
