"""Processes for tests that end a run from outside: every descendant of a process now
(`descendants`, from /proc) and whether some processes are gone (`gone`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path


def descendants(pid: int) -> list[int]:
    """Every descendant of ``pid`` now (from /proc; Linux)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    found, frontier = [], [pid]
    while frontier:
        current = frontier.pop()
        kids = [p for p, parent in parents.items() if parent == current]
        found += kids
        frontier += kids
    return found


def gone(pids: Sequence[int], within: float = 60.0) -> bool:
    """Whether every process of ``pids`` has left /proc within ``within`` seconds."""
    deadline = time.monotonic() + within
    while any(Path(f"/proc/{pid}").exists() for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True
