"""Entries to per-case index fits: the commits in order (git's first-parent line when the
repository is at hand, `gitcmd.first_parent`), each case's pairs, the fit with or without
anchor pairs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pytest_mxperf.history.entries import Entry
from pytest_mxperf.history.fit import Fit, Pair, fit
from pytest_mxperf.paired.gitcmd import first_parent

#: A step of the index is marked when it is at least `MARK_MIN_STEP` in size and either its
#: interval at this level excludes no change or its own pair decided it (regressed or
#: improved, at the pair's own 99% and minimum effect). Why not 95% (docs/history.md, "Marked
#: steps"): a page of 30 steps per case would mark a false step in most noisy histories.
MARK_LEVEL = 0.99
#: Half the paired runs' default minimum effect (5%): a step under it is below what the pairs
#: are made to detect (a 1.2% step on identical code excluded no change at 95% in round 4).
MARK_MIN_STEP = 0.025
#: Verdicts of a pair that decided a change, and its direction.
DECIDED = {"regressed": -1, "improved": 1}


def line_of(repo: Path | None, rev: str = "HEAD") -> list[str]:
    """The shas of ``rev``'s first-parent line, oldest first ([] without a repository)."""
    return [c.sha for c in first_parent(repo, rev)]


def commit_order(entries: Sequence[Entry], line: Sequence[str] = ()) -> list[str]:
    """Every commit the entries name, oldest first: those on ``line`` (the first-parent line,
    oldest first) in its order, then the others by the date their entries give, bases first."""
    named = {c for e in entries for c in e.pair}
    on_line = [c for c in line if c in named]
    rest: list[str] = []
    for e in sorted(entries, key=lambda e: e.date):
        rest += [c for c in e.pair if c not in on_line and c not in rest]
    return on_line + rest


def is_anchor(pair: tuple[str, str], order: Sequence[str]) -> bool:
    """A pair that spans more than one step of ``order`` (HEAD paired with an older anchor)."""
    base, commit = pair
    return order.index(commit) - order.index(base) != 1


def pairs(entries: Sequence[Entry], case: str) -> list[Pair]:
    return [Pair(e.base, e.commit, e.log_ratio, e.log_se, e.df) for e in entries if e.case == case]


def case_fits(
    entries: Sequence[Entry],
    order: Sequence[str],
    *,
    anchors: bool = True,
    level: float = 0.95,
    step_level: float = MARK_LEVEL,
    min_step: float = MARK_MIN_STEP,
) -> dict[str, Fit]:
    """The fit of every case; ``anchors=False`` keeps only the chain (pairs of neighbours in
    the case's own commit order), to show what the anchors bought."""
    fits = {}
    for case in sorted({e.case for e in entries}):
        mine = [e for e in entries if e.case == case]
        own = [c for c in order if any(c in e.pair for e in mine)]
        chain = [e for e in mine if not is_anchor(e.pair, own)]
        decided = {e.commit: DECIDED[e.status] for e in chain if e.status in DECIDED}
        used = mine if anchors else chain
        fits[case] = fit(own, pairs(used, case), level, step_level, min_step, decided)
    return fits
