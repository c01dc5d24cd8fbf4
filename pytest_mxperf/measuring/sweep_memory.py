"""A sweep's memory: sizes in bytes, the process's peak resident set per point, and the budget.

On CPU the peak is ``VmHWM`` of ``/proc/self/status``, reset before each point through
``/proc/self/clear_refs`` (where that is not allowed, ``VmRSS`` sampled in a thread). A point whose
extrapolated peak would exceed the budget is never run.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pytest_mxperf.measuring.memory import read_status_kb, reset_peak

#: Extrapolated peaks get this margin before they are compared with the budget.
BUDGET_MARGIN = 1.10
#: A failed point that leaves this much more resident memory behind is reported.
RETAINED_REPORT = 64 * 2**20


def mib(n: float) -> str:
    return f"{n / 2**20:.0f} MiB"


def read_status() -> dict[str, int]:
    """``VmRSS``/``VmHWM``/``VmSize``... of this process in bytes ({} where /proc is missing)."""
    return {name: kb * 1024 for name, kb in read_status_kb().items()}


def available_memory() -> int | None:
    """``MemAvailable`` of /proc/meminfo in bytes (None where unknown)."""
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return None
    match = re.search(r"^MemAvailable:\s+(\d+) kB", text, re.M)
    return int(match.group(1)) * 1024 if match else None


class PeakMeter:
    """The process's peak resident memory during a block of code."""

    def __init__(self, status: Callable[[], dict[str, int]] = read_status) -> None:
        self._status = status
        self.peak: int | None = None
        self.before: int | None = None

    @contextlib.contextmanager
    def measuring(self) -> Iterator[PeakMeter]:
        self.before = self._status().get("VmRSS")
        reset = reset_peak()
        samples: list[int] = []
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.02):
                rss = self._status().get("VmRSS")
                if rss is not None:
                    samples.append(rss)

        thread = None if reset else threading.Thread(target=sample, daemon=True)
        if thread is not None:
            thread.start()
        try:
            yield self
        finally:
            stop.set()
            if thread is not None:
                thread.join()
            now = self._status()
            seen = [*samples, now.get("VmRSS", 0)]
            if reset and "VmHWM" in now:
                seen.append(now["VmHWM"])
            self.peak = max(seen) or None


@dataclass
class MemoryBudget:
    """Predicts a point's peak from the points measured so far; refuses points over budget."""

    budget: int
    #: (batch size, peak bytes) of measured points.
    seen: list[tuple[int, int]] = field(default_factory=list)
    #: The process's resident memory before the first point.
    start: int | None = None

    def record(self, batch: int, peak: int | None) -> None:
        if peak is not None:
            self.seen.append((batch, peak))

    def predict(self, batch: int) -> int | None:
        """peak(b) = c + k * b through the two largest measured points; with one point, all of
        its growth over the starting memory is charged to the batch (an overestimate)."""
        points = sorted(self.seen)
        if not points:
            return None
        b2, p2 = points[-1]
        if len(points) == 1:
            base = self.start if self.start is not None else 0
            slope = max(p2 - base, 0) / b2
        else:
            b1, p1 = points[-2]
            slope = max((p2 - p1) / (b2 - b1), 0.0)
        return int(p2 + slope * (batch - b2))

    def refuses(self, batch: int) -> str | None:
        """Why ``batch`` must not run (predicted peak over budget), else None."""
        if not self.seen and self.start is not None and self.start * BUDGET_MARGIN > self.budget:
            return (
                f"the memory budget {mib(self.budget)} is below what the process already holds "
                f"before the first batch ({mib(self.start)} resident)"
            )
        predicted = self.predict(batch)
        if predicted is not None and predicted * BUDGET_MARGIN > self.budget:
            return (
                f"predicted peak {mib(predicted)} (+{BUDGET_MARGIN - 1:.0%} margin) exceeds the "
                f"memory budget {mib(self.budget)}"
            )
        return None
