"""First step and warm-up as figures: flag a large growth, ignore the noise of tiny times.

The first step of a case holds graph building, oneDNN primitive creation, cuDNN autotune and
memory-pool growth; the warm-up is how long the engine took to reach steady throughput. Neither
is a throughput, but a first step that became 3x slower is a change users want to hear about.
Times of a few milliseconds jitter by more than 2x on a shared machine, so a change must also
exceed an absolute floor.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TimeChange:
    """One startup figure (seconds) before -> after and whether it grew too much."""

    name: str
    base_s: float
    now_s: float
    factor: float
    floor_s: float

    @property
    def ratio(self) -> float | None:
        """now / base; None when the baseline is zero."""
        return self.now_s / self.base_s if self.base_s > 0 else None

    @property
    def grew(self) -> bool:
        """At least ``factor`` times the baseline and at least ``floor_s`` longer."""
        return self.now_s - self.base_s >= self.floor_s and self.now_s >= self.factor * self.base_s

    @property
    def message(self) -> str:
        ratio = "" if self.ratio is None else f" ({self.ratio:.1f}x)"
        return f"{self.name}: {_s(self.base_s)} -> {_s(self.now_s)}{ratio}"


@dataclass(frozen=True)
class StartupChange:
    """The first-step and warm-up figures of a case against its baseline."""

    first_step: TimeChange
    warmup: TimeChange

    @property
    def messages(self) -> list[str]:
        """One line per figure that grew too much (empty when none did)."""
        return [c.message for c in (self.first_step, self.warmup) if c.grew]


def startup_change(
    base_first_step_s: float,
    now_first_step_s: float,
    base_warmup_s: float,
    now_warmup_s: float,
    factor: float = 2.0,
    floor_s: float = 0.05,
) -> StartupChange:
    """Flag a first step or warm-up that became ``factor`` times longer and ``floor_s`` longer."""
    if factor <= 1.0:
        raise ValueError("factor must be > 1")
    if floor_s < 0:
        raise ValueError("floor_s must be >= 0")
    return StartupChange(
        TimeChange("first step", base_first_step_s, now_first_step_s, factor, floor_s),
        TimeChange("warm-up", base_warmup_s, now_warmup_s, factor, floor_s),
    )


def _s(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1.0 else f"{seconds:.2f} s"
