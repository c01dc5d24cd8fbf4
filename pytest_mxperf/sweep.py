"""Sweeps over batch size (up to the largest that fits) and precision, without pytest.

A sweep measures one model at many batch sizes, each point a normal case (`run_case` through
the caller's ``measure_point``). With ``"auto"`` it doubles the batch until a point does not fit
(an out-of-memory result, or on CPU a memory budget the next point is predicted to exceed), then
bisects between the last fit and the first failure. The curve says where it ended, the largest
batch that fits, the batch with the best images/sec and where throughput stops growing.

Memory on CPU is the process's peak resident set (``VmHWM`` of ``/proc/self/status``, reset before
each point through ``/proc/self/clear_refs``; where that is not allowed, ``VmRSS`` sampled every
20 ms). The next point's peak is extrapolated linearly from the measured ones, so a point that
would exceed the budget is never run: a CPU sweep never pushes the machine into swap.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

AUTO = "auto"
#: Where ``auto`` stops doubling when nothing fails first.
MAX_BATCH = 4096
#: Throughput within this fraction of the best counts as "no longer growing" (at least; the
#: best point's own block spread widens it).
PLATEAU_NOISE = 0.05
#: Extrapolated peaks get this margin before they are compared with the budget.
BUDGET_MARGIN = 1.10
#: A failed point that leaves this much more resident memory behind is reported.
RETAINED_REPORT = 64 * 2**20

_UNITS = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def parse_size(text: str) -> int:
    """``"2GiB"``, ``"2g"``, ``"512M"``, ``"1.5GB"`` or bytes -> bytes (binary units)."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kmgt]?)(i?b)?\s*", text.lower())
    if not match:
        raise ValueError("must be a size such as 2GiB, 512MiB or a number of bytes")
    value = int(float(match.group(1)) * _UNITS[match.group(2)])
    if value <= 0:
        raise ValueError("must be > 0")
    return value


def mib(n: float) -> str:
    return f"{n / 2**20:.0f} MiB"


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


# memory --------------------------------------------------------------------------------------
STATUS = Path("/proc/self/status")
CLEAR_REFS = Path("/proc/self/clear_refs")


def read_status(path: Path = STATUS) -> dict[str, int]:
    """``VmRSS``/``VmHWM``/``VmSize`` in bytes ({} where /proc is missing)."""
    try:
        text = path.read_text()
    except OSError:
        return {}
    found = re.findall(r"^(Vm\w+):\s+(\d+) kB", text, re.M)
    return {name: int(kb) * 1024 for name, kb in found}


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
        reset = _reset_peak()
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


def _reset_peak() -> bool:
    """Reset ``VmHWM`` to the current resident size (Linux >= 4.0)."""
    try:
        CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return True


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
        if not time_left():
            point = Point(batch, "time")
        else:
            why = None if budget is None else budget.refuses(batch)
            point = Point(batch, "budget", note=why) if why else measure_point(batch)
            if budget is not None and point.status != "budget":
                budget.record(batch, point.peak_bytes)
                if point.peak_bytes is not None and point.peak_bytes > budget.budget:
                    point.over_budget = True
                    point.note = (
                        f"peak {mib(point.peak_bytes)} exceeded the memory budget "
                        f"{mib(budget.budget)}"
                    )
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


# precision ------------------------------------------------------------------------------------
FP16_CPU_REASON = (
    "float16 on CPU: MXNet 1.9 has no float16 GEMM on CPU (benchmark_score skips it too)"
)
BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_flags(path: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The first CPU's feature flags (empty where /proc/cpuinfo is missing)."""
    try:
        text = path.read_text()
    except OSError:
        return frozenset()
    match = re.search(r"^flags\s*:\s*(.*)$", text, re.M)
    return frozenset(match.group(1).split()) if match else frozenset()


def unsupported_dtype(
    dtype: str, kind: str, mode: str, *, flags: frozenset[str], features: str
) -> str | None:
    """Why ``dtype`` cannot be measured on ``kind`` in ``mode`` here (None: it can).

    :param flags: the CPU's flags (`cpu_flags`); :param features: MXNet's enabled build
        features, comma-separated (``software()["mxnet_features"]``)."""
    if dtype == "float16" and kind == "cpu":
        return FP16_CPU_REASON
    if dtype not in ("amp", "bfloat16"):
        return None
    if mode != "inference":
        return (
            f"{dtype} {mode}: AMP training needs amp.init() before the network is built, which "
            "changes every later case of the process; only AMP inference is measured"
        )
    if dtype == "amp" and kind == "cpu":
        return "amp (float16 mixed precision) on CPU: MXNet 1.9 has no float16 GEMM on CPU"
    if dtype == "bfloat16" and kind != "cpu":
        return "bfloat16 AMP in MXNet 1.9 runs through oneDNN on CPU only"
    if dtype == "bfloat16":
        if "MKLDNN" not in features.split(","):
            return "bfloat16 on CPU needs MXNet built with oneDNN (MKLDNN feature off)"
        if not flags & set(BF16_FLAGS):
            return (
                "bfloat16 on this CPU: no avx512_bf16 or amx_bf16 flag in /proc/cpuinfo, so "
                "oneDNN would emulate bfloat16 (slower than float32, nothing worth measuring)"
            )
    return None


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
    #: Every measured point as a normal case (`pytest_mxperf.records.CaseResult`).
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
