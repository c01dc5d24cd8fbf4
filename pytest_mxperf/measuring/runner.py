"""Prepare, warm up, measure, check: one case, without pytest.

The ``mxperf`` fixture, the scripts and the processes of a paired run all call `run_case`, so a
case is measured the same way wherever it runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_mxperf.measuring import diagnosis
from pytest_mxperf.measuring.attempts import Attempts, oom_message
from pytest_mxperf.measuring.diagnosis import DiagnoseSpec, Diagnosis
from pytest_mxperf.measuring.measure import MeasureConfig, Measurement, measure
from pytest_mxperf.measuring.protocol import Backend, Prepared, PrepareSpec, SpecError
from pytest_mxperf.measuring.records import Status

#: Exceptions that mean the call itself is wrong (what was handed cannot be benchmarked), not
#: that the model failed: they propagate to the test as usage errors. Anything the model raises,
#: a ValueError included, makes the case an "error" row and the run goes on.
USAGE_ERRORS = (SpecError,)


@dataclass
class CaseRun:
    """What measuring one case gave: the best attempt, every attempt's img/s, and how it ended."""

    status: Status = Status.OK
    measurement: Measurement | None = None
    attempts: list[float] = field(default_factory=list)
    error: str | None = None
    #: Why the figure may not mean what it says (the case still counts).
    warnings: list[str] = field(default_factory=list)
    #: Multiply-accumulates per image from the model's graph (None for a plain callable).
    macs_per_image: int | None = None
    #: Peak memory and, when asked, the operator profile, taken around the timed blocks.
    diagnosis: Diagnosis = field(default_factory=Diagnosis)


def nothing_computed(m: Measurement) -> str:
    per_call = sorted(m.block_seconds)[len(m.block_seconds) // 2] / m.steps_per_block
    return (
        f"the callable returned None on every call: no NDArray to wait on, so nothing may have "
        f"been computed (one call took {per_call * 1e6:.3g} µs, {m.items_per_sec:.4g} items/s); "
        "return the NDArray(s) it computes"
    )


def record_failure(run: CaseRun, backend: Backend, exc: Exception) -> None:
    """How a case that raised ends: out of memory is a result (`Status.OOM`), `USAGE_ERRORS`
    propagate, anything else from the model is `Status.ERROR` with its message."""
    if backend.is_oom(exc):
        run.status, run.measurement = Status.OOM, None
        run.error = oom_message(exc)
    elif isinstance(exc, USAGE_ERRORS):
        raise exc
    else:
        run.status, run.measurement = Status.ERROR, None
        run.error = f"{type(exc).__name__}: {exc}"


def _profile(run: CaseRun, backend: Backend, prepared: Prepared, diagnose: DiagnoseSpec) -> None:
    """Profile the measured step when ``diagnose`` asks (after the last timed block)."""
    best = run.measurement
    if best is None:
        return
    if diagnose.trace_path is not None or diagnose.profile_if(best):
        found = diagnosis.profile_case(backend, prepared, best, diagnose.trace_path)
        found.memory = run.diagnosis.memory
        run.diagnosis = found


def better_attempt(m: Measurement, best: Measurement) -> bool:
    """Whether attempt ``m`` beats the best so far: a steady attempt (`Measurement.steady`)
    beats a spread one, a faster one a slower. A faster attempt whose blocks spread too far to
    judge is no better figure than a steady one (nor storable as a baseline)."""
    return (m.steady, m.items_per_sec) > (best.steady, best.items_per_sec)


def best_of(
    run: CaseRun,
    attempt: Callable[[], Measurement],
    attempts: int,
    again: Callable[[Measurement], bool],
    keep: Callable[[Measurement], Measurement],
) -> None:
    """`Attempts` of a plain, pipeline or end-to-end case into ``run``: every attempt's img/s,
    the best (`better_attempt`) as ``keep`` makes it, while ``again(best so far)``."""
    tried: Attempts[Measurement] = Attempts(attempts)

    def measured() -> Measurement:
        m = attempt()
        run.attempts.append(m.items_per_sec)
        return m

    run.measurement = tried.run(
        measured, better=better_attempt, again=lambda best, _: again(best), keep=keep
    )


def _best_of(
    run: CaseRun,
    backend: Backend,
    prepared: Prepared,
    config: MeasureConfig,
    attempts: int,
    again: Callable[[Measurement], bool],
) -> None:
    first: list[Measurement] = []

    def attempt() -> Measurement:
        m = measure(
            prepared.step,
            items_per_step=prepared.items_per_step,
            sync=backend.sync,
            clock=backend.clock,
            config=config,
            extra=prepared.info,
        )
        first[:] = first or [m]
        return m

    def keep(m: Measurement) -> Measurement:
        # Only the first attempt starts cold: its first step and warm-up are the case's.
        cold = first[0]
        if m is cold:
            return m
        return replace(
            m, first_step_seconds=cold.first_step_seconds, warmup_seconds=cold.warmup_seconds
        )

    best_of(run, attempt, attempts, again, keep)


def run_case(
    backend: Backend,
    model: Any,
    spec: PrepareSpec,
    config: MeasureConfig,
    *,
    attempts: int = 1,
    again: Callable[[Measurement], bool] = lambda m: False,
    diagnose: DiagnoseSpec | None = None,
) -> CaseRun:
    """Measure ``model`` under ``spec``: up to ``attempts`` times while ``again(best so far)``
    says so (a suspected regression, or one too spread to judge, is re-measured; the best
    attempt counts, `better_attempt`, as the baseline was stored as the best of as many), then
    check the output for NaN/inf.

    Out-of-memory is a result (`Status.OOM`); any other failure of the model is `Status.ERROR`
    with its message; `USAGE_ERRORS` propagate.

    With ``diagnose``, the peak memory of the case (prepare to the last timed block) is probed
    from before ``prepare`` to after the last attempt, and the warm step is profiled after it
    when ``diagnose`` asks: neither runs inside a timed block.
    """
    run = CaseRun()
    prepared = None
    probe = None if diagnose is None else diagnosis.start_memory(backend, spec.ctx)
    try:
        prepared = backend.prepare(model, spec)
        run.macs_per_image = prepared.macs_per_image
        _best_of(run, backend, prepared, config, attempts, again)
        run.diagnosis.memory = diagnosis.stop_memory(probe)
        probe = None
        problem = prepared.check()
        if problem:
            run.status, run.error = Status.NAN, problem
        if run.measurement is not None and not prepared.computed():
            run.warnings.append(nothing_computed(run.measurement))
        if diagnose is not None and run.status == Status.OK:
            _profile(run, backend, prepared, diagnose)
    except Exception as exc:
        record_failure(run, backend, exc)
    finally:
        del prepared  # free the model and its buffers before the next case
        with contextlib.suppress(Exception):
            backend.sync()  # surface nothing more from a failed case into the next one
    return run
