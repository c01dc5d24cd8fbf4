"""A pull request's own pair as the entries of the commit it was merged as.

A pull request's job pairs the PR (GitHub's test merge commit: the PR merged into its base) with
its base, on its own runner. When that PR is merged and the commit it becomes has the same tree
(the files the pair measured) and the commit the main-branch job would pair with is that same
base, the main job would measure again what the PR's job measured: the same code against the
same code. It adopts that pair instead: the entries are the PR pair's ratios, named by the
merged commit, with the sha the pair measured as HEAD kept beside them (``Entry.measured``).

Refused, by name (the job then pairs as usual): a report of a working tree with uncommitted
changes, one with no tree recorded, a tree that is not the commit's (the base moved after the
PR's job ran, or the merge resolved something), a pair whose other commit is not the chain's
base (`anchors.base`). Which report to adopt is the workflow's choice: a pull request from a
fork runs code nobody reviewed, which could write any report; the example's main workflow
adopts only the report of a pull request from a branch of the repository itself.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_mxperf.history import anchors
from pytest_mxperf.history.entries import Entry, from_report
from pytest_mxperf.paired.gitcmd import git, resolve_rev


class NotAdopted(Exception):
    """The report's pair is not this commit's step; the message says why."""


@dataclasses.dataclass(frozen=True)
class Adopted:
    entries: list[Entry]
    measured: str  # the sha the pair measured as HEAD
    base: str  # the commit it was paired with (the chain's base)
    regressed: list[str]  # keys of the cases the pair judged regressed


def _commit_date(repo: Path, sha: str) -> str:
    stamp = int(git(repo, "log", "-1", "--format=%ct", sha).stdout.strip())
    return _dt.datetime.fromtimestamp(stamp, tz=_dt.timezone.utc).isoformat()


def adopt(
    report: dict[str, Any],
    where: str,
    repo: Path,
    stored: Sequence[Entry],
    rev: str = "HEAD",
) -> Adopted:
    """The entries of the paired run ``report`` as the entries of ``rev``, or `NotAdopted`.

    :param stored: the history's entries (which commit the chain's base is).
    :raises EntryError: the report is not a paired run's (as `entries.from_report`).
    """
    found = from_report(report, where)
    if not found:
        raise NotAdopted(f"{where}: no case of this paired run measured a ratio")
    commit = (report.get("run") or {}).get("commit") or {}
    measured = str(commit.get("sha") or "")
    if commit.get("dirty") is not False:
        said = "uncommitted changes" if commit.get("dirty") else "a tree of unknown state"
        raise NotAdopted(f"{where} measured a working tree with {said}, not a commit's tree")
    tree = str(commit.get("tree") or "")
    if not tree:
        raise NotAdopted(
            f"{where} records no tree (run.commit.tree): written by an older pytest-mxperf"
        )
    head = resolve_rev(repo, rev)
    head_tree = git(repo, "rev-parse", f"{head}^{{tree}}").stdout.strip()
    if tree != head_tree:
        raise NotAdopted(
            f"{where} measured the tree {tree[:10]} (commit {measured[:10]}), {rev} "
            f"({head[:10]}) has the tree {head_tree[:10]}: the code differs (the base moved "
            "after that job, or the merge changed something)"
        )
    bases = sorted({e.base for e in found})
    base = anchors.base(repo, stored, head)
    if bases != [base]:
        raise NotAdopted(
            f"{where} paired {measured[:10]} with {', '.join(b[:10] for b in bases)}; "
            f"{rev}'s job pairs with {base[:10]} (its last first-parent ancestor with an entry)"
        )
    date = _commit_date(repo, head)
    entries = [
        dataclasses.replace(
            e, commit=head, date=date, measured="" if e.commit == head else e.commit
        )
        for e in found
    ]
    regressed = sorted(e.case for e in found if e.status == "regressed")
    return Adopted(entries, measured, base, regressed)
