"""``--mxperf-history STORE``: a paired run adds its entries to the store itself, at its end
(the same as ``mxperf history add`` on its JSON report)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_mxperf.history.entries import Entry, EntryError, from_report
from pytest_mxperf.history.entrystore import StoreError, open_store
from pytest_mxperf.paired.gitcmd import WorktreeError, git


def subject(repo: Path, sha: str) -> str:
    """The commit's subject line, or "" where git at ``repo`` does not know the commit."""
    done = git(repo, "log", "-1", "--format=%s", sha, check=False)
    return done.stdout.strip() if done.returncode == 0 else ""


def with_subjects(found: Sequence[Entry], repo: Path) -> list[Entry]:
    """The entries with their commit's subject, where git at ``repo`` knows the commit."""
    subjects = {sha: subject(repo, sha) for sha in {e.commit for e in found}}
    return [dataclasses.replace(e, subject=subjects[e.commit]) for e in found]


def add_from_run(report: dict[str, Any], spec: str, repo: str | None) -> tuple[str, str | None]:
    """Add the run's entries to the store ``spec``: ``(what was added, None)`` or
    ``("", the error)`` (the run's JSON report, if asked for, still holds them)."""
    root = Path(repo or ".")
    try:
        found = from_report(report, "this run")
        if not found:
            return "", "--mxperf-history: no case of this paired run measured a ratio"
        where = open_store(spec, root)
        added = where.add(with_subjects(found, root))
    except (EntryError, StoreError, WorktreeError) as exc:
        return "", f"--mxperf-history: entries not stored: {exc}"
    return f"{added} new of {len(found)} history entries in {where.describe()}", None
