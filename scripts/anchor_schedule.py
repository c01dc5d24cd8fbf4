"""What a sparser anchor schedule would have given on a recorded history: each case's index
refitted from the same entries, keeping only the anchor pairs of every K-th commit.

Reads a history store (a directory, or ``git:BRANCH`` of the repository ``--repo``) whose jobs
paired with an anchor every few commits (``mxperf history anchor --every``), and for each K of
``--every`` drops the anchor pairs whose newer commit is not a multiple of K along the
first-parent line (counted from the first commit with entries), then fits as
``mxperf history show`` does. Per K it prints the anchored jobs left, and per case the 95%
interval of the index at the last commit, the widest interval over the commits and where, and
the steps marked. K must be a multiple of the recorded schedule's (a K that keeps anchors the
recording never measured keeps none of them there). The cost of a schedule is not measured
here: an anchored job runs a second paired run.

    python scripts/anchor_schedule.py --store DIR --repo CLONE --every 5,10,15
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from pytest_mxperf.history import entrystore
from pytest_mxperf.history.entries import Entry
from pytest_mxperf.history.index import case_fits, commit_order, is_anchor, line_of


def thinned(entries: Sequence[Entry], order: Sequence[str], every: int) -> list[Entry]:
    """``entries`` without the anchor pairs whose newer commit's place in ``order`` is not a
    multiple of ``every``."""
    place = {c: i for i, c in enumerate(order)}
    return [
        e
        for e in entries
        if not is_anchor(e.pair, order) or max(place[c] for c in e.pair) % every == 0
    ]


def report(entries: Sequence[Entry], order: Sequence[str], every: int | None) -> list[str]:
    """The lines for one schedule (None: the chain alone, no anchor pair)."""
    kept = list(entries) if every is None else thinned(entries, order, every)
    anchored = sorted({e.commit for e in kept if is_anchor(e.pair, order)}, key=order.index)
    places = [order.index(c) for c in anchored]
    lines = [
        "chain only (the anchor pairs left out of the fit)"
        if every is None
        else f"anchors every {every}: {len(anchored)} anchored job(s) at {places}"
    ]
    for case, fitted in case_fits(kept, order, anchors=every is not None).items():
        last = fitted.points[-1]
        widest = max(fitted.points[1:], key=lambda p: (p.high - p.low) / p.index)
        marked = [order.index(s.commit) for s in fitted.steps if s.changed]
        lines.append(
            f"  {case}: at {order.index(last.commit)} {last.low / last.index - 1:+.2%} .. "
            f"{last.high / last.index - 1:+.2%}; widest at {order.index(widest.commit)} "
            f"±{(widest.high - widest.low) / 2 / widest.index:.1%}; steps marked at {marked}"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True, help="a directory, or git:BRANCH of --repo")
    parser.add_argument("--repo", type=Path, default=Path("."), help="the project's clone")
    parser.add_argument("--every", default="5,10,15", help="anchor schedules to try, e.g. 5,10")
    args = parser.parse_args()
    schedules = [int(k) for k in args.every.split(",")]
    if any(k < 1 for k in schedules):
        parser.error(f"--every takes positive whole numbers, got {args.every!r}")
    found = entrystore.read_store(entrystore.open_store(args.store, args.repo, fetch=False))
    if not found:
        parser.error(f"no entries in {args.store}")
    order = commit_order(found, line_of(args.repo))
    for every in [*schedules, None]:
        print("\n".join(report(found, order, every)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
