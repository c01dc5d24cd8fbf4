"""Processes for tests that end a run from outside: every descendant of a process now
(`descendants`, from /proc) and whether some processes are gone (`gone`); and for the scripts
that run pytest, a SIGTERM that ends what they started (`end_on_sigterm`)."""

from __future__ import annotations

import signal
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


def end_on_sigterm() -> None:
    """Make SIGTERM end this script as Ctrl-C does, with the process it waits on.

    By default a SIGTERM kills the script alone, and the pytest run it was waiting on goes on to
    its end: minutes of benchmarks on a machine someone meant to free. As KeyboardInterrupt,
    `subprocess.run` kills its child on the way out; that run's fork servers see their stdin
    close and end their sides, and a data-parallel launch's ranks die with their parent. Call
    it in a script's ``__main__`` block only (never in a process that hosts tests)."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)
