"""A fake clock for the unit tests of the timing engine (`pytest_mxperf.measuring.measure`).

Durations are powers of two so float arithmetic on the fake clock never rounds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytest_mxperf.measuring.measure import MeasureConfig, Measurement, measure

STEP = 2.0**-6  # 1/64 s per step
BLOCK = 0.25


class FakeClock:
    """A virtual clock; ``step`` and ``sync`` advance it by scripted amounts."""

    def __init__(
        self,
        step_seconds: Callable[[FakeClock], float] | float = STEP,
        sync_seconds: float = 0.0,
    ) -> None:
        self.now = 0.0
        self.steps = 0
        self.syncs = 0
        self.step_log: list[float] = []
        self._step_seconds = step_seconds
        self._sync_seconds = sync_seconds

    def __call__(self) -> float:
        return self.now

    def step(self) -> None:
        d = self._step_seconds
        seconds = d(self) if callable(d) else d
        self.steps += 1
        self.step_log.append(seconds)
        self.now += seconds

    def sync(self) -> None:
        self.syncs += 1
        self.now += self._sync_seconds


def run(fake: FakeClock, items: int = 8, **config: Any) -> Measurement:
    """`measure` on ``fake`` (steps, syncs, clock and wall clock), blocks of `BLOCK` seconds."""
    cfg = MeasureConfig(**{"block_time": BLOCK, **config})
    return measure(
        fake.step, items_per_step=items, sync=fake.sync, clock=fake, config=cfg, wall_clock=fake
    )
