"""Elapsed and expected time of a long run (the suite's benchmarks, a paired run's rounds), for
the progress lines the plugin prints. Pure: the clock is injected."""

from __future__ import annotations

import time
from typing import Callable

from pytest_mxperf.reporting.cost import format_duration


class Progress:
    """Steps of similar length (benchmarks, sides of paired rounds): how long the run has taken
    and, once a step has finished, about how long the rest will take at the same pace."""

    def __init__(self, total: int | None = None, clock: Callable[[], float] = time.monotonic):
        #: Steps expected in all (None: unknown, e.g. on an xdist controller).
        self.total = total
        self.done = 0
        self._clock = clock
        self._start = clock()

    def advance(self) -> None:
        self.done += 1

    @property
    def elapsed(self) -> float:
        return max(0.0, self._clock() - self._start)

    @property
    def remaining(self) -> float | None:
        """Seconds the steps not yet done will take at the pace so far (None: no estimate)."""
        if not self.done or self.total is None or self.done >= self.total:
            return None
        return self.elapsed / self.done * (self.total - self.done)

    def describe(self) -> str:
        """``3/10, elapsed 1 min 2 s, about 2 min 25 s left`` (as much as is known)."""
        parts = [f"{self.done}/{self.total}" if self.total is not None else str(self.done)]
        parts.append(f"elapsed {format_duration(self.elapsed)}")
        left = self.remaining
        if left is not None:
            parts.append(f"about {format_duration(left)} left")
        return ", ".join(parts)
