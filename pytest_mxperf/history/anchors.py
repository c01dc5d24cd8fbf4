"""Which commit a main-branch job pairs HEAD with: the chain's base (the last commit that has
an entry) and, on a schedule, an anchor (the last tag with entries, else the first commit of
the history).

Why this anchor: the index at commit N is the sum of the steps from the first commit, so a
chain alone has an error that grows as the square root of N. A pair with the first commit (or
a tag, itself anchored) measures the whole sum at once: its error does not grow with N. Every
K-th job (K = ``every``, default 5) pairs HEAD with the anchor too; the fit then bounds the
drift at every commit between anchors to about one anchor pair plus K/2 chain steps. A pair
with "the entry K back" would only divide the chain's growth by K, still growing with N.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pytest_mxperf.history.entries import Entry
from pytest_mxperf.history.index import line_of
from pytest_mxperf.paired.gitcmd import git

#: Jobs between anchor pairs (an anchored job costs one more paired run).
DEFAULT_EVERY = 5


class AnchorError(Exception):
    """No commit to pair with; the message says why."""


def _nodes(entries: Sequence[Entry]) -> set[str]:
    return {c for e in entries for c in e.pair}


def _newest_first(repo: Path, head: str) -> list[str]:
    return line_of(repo, head)[::-1]


def _older(repo: Path, entries: Sequence[Entry], head: str) -> list[str]:
    line = _newest_first(repo, head)
    if not line:
        raise AnchorError(f"{head!r} names no commit in {repo}")
    nodes = _nodes(entries)
    return [c for c in line[1:] if c in nodes]


def base(repo: Path, entries: Sequence[Entry], head: str = "HEAD") -> str:
    """The last first-parent ancestor of ``head`` that has an entry; with none (the first
    job), ``head``'s parent."""
    older = _older(repo, entries, head)
    if older:
        return older[0]
    line = _newest_first(repo, head)
    if len(line) < 2:
        raise AnchorError(
            "no entry in the history and no parent commit to pair with (a shallow clone? "
            "check out with fetch-depth: 0)"
        )
    return line[1]


def _last_tag(repo: Path, older: Sequence[str]) -> str | None:
    tagged = git(repo, "tag", "--format=%(objectname) %(*objectname)", check=False).stdout
    shas = {s for line in tagged.splitlines() for s in line.split()}
    return next((c for c in older if c in shas), None)


def anchor(
    repo: Path, entries: Sequence[Entry], head: str = "HEAD", every: int = DEFAULT_EVERY
) -> str | None:
    """The anchor ``head``'s job pairs with, or None when this job is not due one (or the
    anchor is the chain's base anyway). Due: every ``every``-th commit that has entries,
    counted along the first-parent line."""
    if every < 1:
        raise AnchorError(f"--every must be >= 1, got {every}")
    older = _older(repo, entries, head)
    if not older or len(older) % every:
        return None
    target = _last_tag(repo, older) or older[-1]
    return None if target == older[0] else target
