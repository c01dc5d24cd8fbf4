"""Say what got slower: the operator profile, peak memory and start-up figures of a case, taken
around (never inside) its timed blocks, and memory and start-up judged against the baseline.

`run_case` brackets a case with a memory probe (before ``prepare``, after the last timed
block) and, when asked, profiles a few more steps of the already measured, warm step with
MXNet's profiler. The fixture then judges memory and start-up against the baseline and, for a
regression, appends the evidence sections (`evidence_lines`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.measuring.measure import Measurement
from pytest_mxperf.measuring.memory import MemoryProbe, MemoryRecord, MemoryTrend, memory_change
from pytest_mxperf.measuring.protocol import Backend, Prepared
from pytest_mxperf.measuring.records import CaseResult, Verdict
from pytest_mxperf.measuring.startup import startup_change
from pytest_mxperf.measuring.stats import median
from pytest_mxperf.measuring.verdicts import message_lines, render_message
from pytest_mxperf.profiles import profiling
from pytest_mxperf.profiles.profile_record import OperatorProfile, ProfileUnavailable
from pytest_mxperf.profiles.profile_trace import TraceFiles, table_path_for

#: A profile runs about this long (in steps of the measured per-step time), within the bounds.
PROFILE_SECONDS = 0.5
PROFILE_MIN_STEPS = 3
PROFILE_MAX_STEPS = 20


class Probe(Protocol):
    def start(self) -> Any: ...

    def stop(self) -> MemoryRecord: ...


@dataclass(frozen=True)
class DiagnoseSpec:
    """What `run_case` takes besides the throughput: the Chrome trace file to write (profiles
    every case), and when to profile without one (a suspected regression)."""

    trace_path: Path | None = None
    profile_if: Callable[[Measurement], bool] = lambda m: False


@dataclass
class Diagnosis:
    """What was taken around a case's timed blocks."""

    memory: MemoryRecord | None = None
    profile: OperatorProfile | None = None
    profile_error: str | None = None
    trace: TraceFiles | None = None


# taking the figures ---------------------------------------------------------------------------
def profiler_module(backend: Backend) -> Any | None:
    """The module whose ``profiler`` attribute is MXNet's profiler (``backend.mx``), if any."""
    return getattr(backend, "mx", None)


def start_memory(backend: Backend, ctx: Any) -> Probe | None:
    """A started memory probe for ``ctx`` (the back end's own, else /proc or
    ``gpu_memory_info``); None where memory cannot be read."""
    try:
        own = getattr(backend, "memory_probe", None)
        if own is not None:
            probe: Probe = own(ctx)
        else:
            kind, index = backend.describe(ctx)
            if kind == "gpu":
                probe = MemoryProbe("gpu", index, mx=profiler_module(backend))
            else:
                probe = MemoryProbe("cpu")
        probe.start()
        return probe
    except Exception:
        return None  # no memory figure rather than a lost case


def stop_memory(probe: Probe | None) -> MemoryRecord | None:
    if probe is None:
        return None
    try:
        return probe.stop()
    except Exception:
        return None


def profile_steps(m: Measurement) -> int:
    """Steps to profile: about `PROFILE_SECONDS` at the measured speed, within the bounds."""
    per_step = median(list(m.block_seconds)) / m.steps_per_block
    wanted = math.ceil(PROFILE_SECONDS / per_step) if per_step > 0 else PROFILE_MAX_STEPS
    return int(min(max(wanted, PROFILE_MIN_STEPS), PROFILE_MAX_STEPS))


def profile_case(
    backend: Backend, prepared: Prepared, m: Measurement, trace_path: Path | None
) -> Diagnosis:
    """Profile the measured, warm step (after its last timed block). Never raises: a failure
    is ``profile_error`` ("profile unavailable: <reason>" in messages)."""
    out = Diagnosis()
    mx = profiler_module(backend)
    if mx is None:
        out.profile_error = "this back end has no MXNet profiler"
        return out
    try:
        out.profile = profiling.profile_step(
            prepared.step,
            backend.sync,
            profile_steps(m),
            mx,
            trace_path,
            items_per_step=prepared.items_per_step,
        )
        if trace_path is not None:
            out.trace = TraceFiles(trace_path, table_path_for(trace_path))
    except ProfileUnavailable as exc:
        out.profile_error = exc.reason
    except Exception as exc:  # the profile explains a result; it must never lose one
        out.profile_error = f"{type(exc).__name__}: {exc}"
    return out


def trace_path_for(directory: str | None, case_key: CaseKey) -> Path | None:
    """``DIR/<safe case key>.trace.json`` for ``--mxperf-profile DIR``."""
    if not directory:
        return None
    return Path(directory) / f"{profiling.safe_case_name(str(case_key))}.trace.json"


def taken(result: CaseResult, found: Diagnosis) -> dict[str, Any]:
    """The fields of ``result`` that `run_case` took around its timed blocks (its peak memory
    and, when profiled, its operator profile or why there is none), for the measured record."""
    return {
        "memory": found.memory,
        "profile": result.profile if found.profile is None else found.profile.as_dict(),
        "profile_error": found.profile_error,
        "profile_trace": str(found.trace.trace) if found.trace else result.profile_trace,
        "profile_table": str(found.trace.table) if found.trace else result.profile_table,
    }


# judging memory and start-up ------------------------------------------------------------------
@dataclass(frozen=True)
class MemoryJudged:
    """A case's peak memory judged (`judge_memory`): the verdict's memory fields, its message's
    lines (a failure added below a failed verdict's, else leading them), whether memory fails
    the case (outcome ``memory``), and a growth to warn of."""

    baseline_memory_mb: float | None
    max_memory_mb: float | None
    memory_trend: str | None
    lines: tuple[str, ...]
    fails: bool = False
    warning: str | None = None


def judge_memory(
    verdict: Verdict,
    lines: tuple[str, ...],
    result: CaseResult,
    base_mb: float | None,
    *,
    tolerance: float,
    strict: bool,
    max_memory_mb: float | None,
) -> MemoryJudged:
    """The memory part of ``verdict`` (its message's lines so far: ``lines``): the trend
    against ``base_mb``; a failure only with ``strict`` (for a growth) or above
    ``max_memory_mb``."""
    now = None if result.memory is None else result.memory.peak_mb
    trend = verdict.memory_trend
    if now is None:
        return MemoryJudged(base_mb, max_memory_mb, trend, lines)
    problem: str | None = None
    warning: str | None = None
    if base_mb is not None:
        change = memory_change(base_mb, now, tolerance)
        trend = change.trend.value
        if change.trend == MemoryTrend.GREW:
            if strict:
                problem = change.message
            else:
                warning = change.message
    if max_memory_mb is not None and now > max_memory_mb:
        problem = f"peak memory {now:.1f} MiB is above the marker's max_memory_mb={max_memory_mb:g}"
    if problem is None:
        return MemoryJudged(base_mb, max_memory_mb, trend, lines, warning=warning)
    if verdict.failed:
        return MemoryJudged(base_mb, max_memory_mb, trend, lines + message_lines(problem))
    lead = message_lines(f"{result.key}: {problem}")
    led = lead + lines if render_message(lines) else lead
    return MemoryJudged(base_mb, max_memory_mb, trend, led, fails=True)


def judge_startup(
    m: Measurement | None, base_first: float | None, base_warmup: float | None
) -> tuple[str, ...] | None:
    """A first step or warm-up that grew by a large factor, flagged (never a failure); None:
    not judged (no figure on one side)."""
    if m is None or base_first is None or base_warmup is None:
        return None
    change = startup_change(base_first, m.first_step_seconds, base_warmup, m.warmup_seconds)
    return tuple(change.messages)
