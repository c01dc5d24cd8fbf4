"""The batch-size search of a sweep (up to the largest that fits) and its curve, without pytest.

A sweep measures one model at many batch sizes, each point a normal case (`run_case` through
the caller's ``measure_point``). With ``"auto"`` it doubles the batch until a point does not fit
(an out-of-memory result, or on CPU a memory budget the next point is predicted to exceed), then
bisects between the last fit and the first failure. The curve says where it ended, the largest
batch that fits, the batch with the best images/sec and where throughput stops growing.

Memory on CPU is the process's peak resident set (``VmHWM`` of ``/proc/self/status``, reset before
each point through ``/proc/self/clear_refs``; where that is not allowed, ``VmRSS`` sampled every
20 ms). The next point's peak is extrapolated linearly from the measured ones, so a point that
would exceed the budget is never run: a CPU sweep never pushes the machine into swap
(:mod:`pytest_mxperf.measuring.sweep_memory`). Which dtypes a device supports is
:mod:`pytest_mxperf.measuring.dtype_support`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_mxperf.measuring.sweep_memory import MemoryBudget, mib

AUTO = "auto"
#: Where ``auto`` stops doubling when nothing fails first.
MAX_BATCH = 4096
#: Throughput within this fraction of the best counts as "no longer growing" (at least; the
#: best point's own block spread widens it).
PLATEAU_NOISE = 0.05


# what the sweep measures in which order ---------------------------------------------------------
def shape_first(batch_sizes: Sequence[int]) -> list[int]:
    """Powers of two first (ascending: the curve's shape), then the rest ascending, so a time
    budget cut still leaves a useful table."""
    unique = sorted(set(batch_sizes))
    powers = [b for b in unique if b & (b - 1) == 0]
    return powers + [b for b in unique if b not in powers]


@dataclass
class Point:
    """One batch size of a sweep: what happened and what it measured."""

    batch_size: int
    #: ok, oom, nan, error (measured); budget (predicted over the memory budget, not run);
    #: time (not measured: the sweep's time budget ran out).
    status: str
    images_per_sec: float | None = None
    rel_iqr: float = 0.0
    peak_bytes: int | None = None
    note: str = ""
    #: Measured, but its peak memory exceeded the budget: it does not count as fitting.
    over_budget: bool = False

    @property
    def fits(self) -> bool:
        return self.status not in ("oom", "budget", "time") and not self.over_budget


@dataclass
class Curve:
    """The points of one dtype and what they say."""

    dtype: str
    points: list[Point] = field(default_factory=list)
    #: Why the doubling stopped: oom, budget, max (reached max_batch), time, list (explicit).
    limit: str = "list"
    skipped: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def measured(self) -> list[Point]:
        return sorted(
            (p for p in self.points if p.images_per_sec is not None), key=lambda p: p.batch_size
        )

    @property
    def not_measured(self) -> list[int]:
        return sorted(p.batch_size for p in self.points if p.status == "time")

    @property
    def largest_fit(self) -> int | None:
        fits = [p.batch_size for p in self.points if p.fits]
        return max(fits) if fits else None

    @property
    def best(self) -> Point | None:
        measured = self.measured
        return max(measured, key=lambda p: p.images_per_sec or 0.0) if measured else None

    @property
    def plateau(self) -> int | None:
        """The smallest batch whose images/sec is within the noise of the best: beyond it a
        bigger batch buys nothing measurable."""
        best = self.best
        if best is None or best.images_per_sec is None:
            return None
        noise = max(PLATEAU_NOISE, best.rel_iqr)
        floor = best.images_per_sec * (1 - noise)
        return min(p.batch_size for p in self.measured if (p.images_per_sec or 0.0) >= floor)

    def summary(self) -> dict[str, Any]:
        """What travels with each point's result (JSON, baselines)."""
        best = self.best
        return {
            "dtype": self.dtype,
            "largest_fit": self.largest_fit,
            "best": None if best is None else best.batch_size,
            "plateau": self.plateau,
            "limit": self.limit,
            "not_measured": self.not_measured,
            "curve": {str(p.batch_size): p.images_per_sec for p in self.measured},
        }

    def describe(self) -> str:
        """One line: largest, best, plateau and what was left out."""
        if self.skipped:
            return f"{self.dtype}: skipped ({self.skipped})"
        best = self.best
        if self.largest_fit is None and self.points:
            first = min(self.points, key=lambda p: p.batch_size)
            why = first.note or first.status
            return f"{self.dtype}: no batch size fits (batch {first.batch_size}: {why})"
        parts = [
            f"{self.dtype}: largest batch that fits {self.largest_fit or 'none'}"
            + (f" (stopped by {self.limit})" if self.limit != "list" else ""),
            "best "
            + ("-" if best is None else f"{best.batch_size} ({best.images_per_sec:.1f} img/s)"),
            f"plateau from {self.plateau or '-'}",
        ]
        if self.not_measured:
            parts.append("not measured (time budget): " + ", ".join(map(str, self.not_measured)))
        return "; ".join(parts)


# the search ------------------------------------------------------------------------------------
#: Measures one batch size and returns its point (status ok/oom/nan/error, img/s, peak).
MeasurePoint = Callable[[int], Point]


@dataclass(frozen=True)
class Plan:
    """How to choose the batch sizes of one curve."""

    batch_sizes: tuple[int, ...] | None  # None: auto
    start: int = 1
    max_batch: int = MAX_BATCH
    #: Bisection stops when the gap is at most this fraction of the last fit (1 batch at least).
    resolution: float = 0.125


def run_curve(
    dtype: str,
    plan: Plan,
    measure_point: MeasurePoint,
    *,
    budget: MemoryBudget | None = None,
    time_left: Callable[[], bool] = lambda: True,
    bisect_after_oom: bool = True,
) -> Curve:
    """Measure one dtype's curve: the explicit sizes in shape-first order, or ``auto``.

    :param bisect_after_oom: False where a second allocation failure may crash the process
        (MXNet on CPU): after a real out-of-memory the doubling ends at the last fit, and only
        a memory budget's predictions (which run nothing) bisect.
    """
    curve = Curve(dtype)

    def attempt(batch: int) -> Point:
        point = _point(batch, measure_point, budget) if time_left() else Point(batch, "time")
        curve.points.append(point)
        return point

    if plan.batch_sizes is not None:
        for batch in shape_first(plan.batch_sizes):
            attempt(batch)
        return curve

    batch, last_fit, first_fail = plan.start, None, None
    curve.limit = "max"
    while batch <= plan.max_batch:
        point = attempt(batch)
        if point.status in ("time", "error"):
            curve.limit = point.status  # a model that raises at one batch raises at the next
            break
        if not point.fits:
            first_fail = batch
            curve.limit = "budget" if point.over_budget else point.status
            break
        last_fit = batch
        batch *= 2
    if last_fit is None or first_fail is None:
        _note_time_cut(curve, batch, plan)
        return curve
    if curve.limit == "oom" and not bisect_after_oom:
        curve.notes.append(NO_BISECT_AFTER_OOM.format(last_fit=last_fit, first_fail=first_fail))
        return curve
    while first_fail - last_fit > max(1, int(last_fit * plan.resolution)):
        middle = (last_fit + first_fail) // 2
        point = attempt(middle)
        if point.status in ("time", "error"):
            break
        if point.fits:
            last_fit = middle
        else:
            first_fail = middle
    return curve


def _point(batch: int, measure_point: MeasurePoint, budget: MemoryBudget | None) -> Point:
    """One batch size measured, or refused by the memory budget's prediction; its peak is
    recorded in the budget, and a point whose peak exceeded it says so."""
    why = None if budget is None else budget.refuses(batch)
    point = Point(batch, "budget", note=why) if why else measure_point(batch)
    if budget is not None and point.status != "budget":
        budget.record(batch, point.peak_bytes)
        if point.peak_bytes is not None and point.peak_bytes > budget.budget:
            point.over_budget = True
            point.note = (
                f"peak {mib(point.peak_bytes)} exceeded the memory budget {mib(budget.budget)}"
            )
    return point


NO_BISECT_AFTER_OOM = (
    "not bisected between {last_fit} and {first_fail}: after a CPU allocation failure MXNet 1.9 "
    "may crash on the next one (seen here: a segfault or 'free(): invalid pointer' when "
    "probing just below the limit), so the largest fit is the last doubling that ran; a "
    "--mxperf-memory-budget below the limit bisects by prediction instead"
)


def _note_time_cut(curve: Curve, batch: int, plan: Plan) -> None:
    if curve.limit == "time":
        rest = []
        while batch * 2 <= plan.max_batch:
            batch *= 2
            rest.append(batch)
        if rest:
            curve.notes.append(
                "the time budget ended the doubling; larger sizes were not tried: "
                + ", ".join(map(str, rest))
            )


def make_plan(batch_sizes: Sequence[int] | str, start: int, max_batch: int) -> Plan:
    """Check the arguments of ``mxperf.sweep`` into a `Plan`."""
    for name, value in (("start", start), ("max_batch", max_batch)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if isinstance(batch_sizes, str):
        if batch_sizes != AUTO:
            raise ValueError(f"batch_sizes must be a list of ints or 'auto', got {batch_sizes!r}")
        if start > max_batch:
            raise ValueError(f"start ({start}) is larger than max_batch ({max_batch})")
        return Plan(None, start, max_batch)
    sizes = tuple(batch_sizes)
    bad = [b for b in sizes if not isinstance(b, int) or isinstance(b, bool) or b < 1]
    if not sizes or bad:
        raise ValueError(f"batch_sizes must be positive ints, got {list(sizes)!r}")
    return Plan(sizes, start, max_batch)


@dataclass
class Sweep:
    """What ``mxperf.sweep`` returns: a curve per dtype and the cases it measured."""

    model: str
    mode: str
    device_kind: str
    curves: dict[str, Curve] = field(default_factory=dict)
    #: Every measured point as a normal case (`pytest_mxperf.measuring.records.CaseResult`).
    results: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The curve of each dtype in words, then the notes."""
        out = [c.describe() for c in self.curves.values()]
        for c in self.curves.values():
            out += [f"{c.dtype}: {n}" for n in c.notes]
        return out + self.notes


def largest_fit_drop(current: int | None, stored: Any) -> str | None:
    """A message when the stored sweep fitted a larger batch than this one does."""
    if not isinstance(stored, dict):
        return None
    before = stored.get("largest_fit")
    if not isinstance(before, int) or current is None or current >= before:
        return None
    return (
        f"the largest batch that fits dropped from {before} to {current} (stopped by "
        f"{stored.get('limit', '?')} before): the model now needs more memory per batch"
    )
