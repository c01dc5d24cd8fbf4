"""A case measured here and judged against its stored baseline: the run under the device lock
(measured again while a regression is suspected or its blocks spread too far to judge, profiled
when one is found), then the verdict, at the threshold a paired run would allow or, without
one, the higher floor (`CaseBench.case` in `pytest_mxperf.case.path` calls these)."""

from __future__ import annotations

import functools
import warnings
from dataclasses import replace
from typing import Any, Callable, Optional

import pytest

from pytest_mxperf.baselines.resolution import BaselineRef
from pytest_mxperf.case import pairs
from pytest_mxperf.case.bench import Bench, Runner
from pytest_mxperf.config.expectation import Expectation
from pytest_mxperf.config.settings import Settings
from pytest_mxperf.judging.changes import what_changed
from pytest_mxperf.judging.decisions import Policy, decide, worth_another_attempt
from pytest_mxperf.judging.explain import judge
from pytest_mxperf.measuring import diagnosis
from pytest_mxperf.measuring.measure import MeasureConfig, Measurement, for_side
from pytest_mxperf.measuring.protocol import PrepareSpec, SpecError
from pytest_mxperf.measuring.records import CaseResult, Outcome, Status
from pytest_mxperf.measuring.runner import CaseRun, run_case
from pytest_mxperf.paired.sides import disturbed
from pytest_mxperf.paired.turns import CaseTurns

#: A case's stored baseline, the marker's expectations, why no pair can confirm a drop, and
#: the policy (`judging_for`). Optional, not ``X | None``: this alias is evaluated at import,
#: and Python 3.9 has no ``|`` between types.
Judging = tuple[Optional[BaselineRef], list[Expectation], Optional[str], Policy]


def measure(
    bench: Bench,
    result: CaseResult,
    net: Any,
    spec: PrepareSpec,
    runner: Runner | None = None,
    *,
    alone: bool = False,
    wide: bool = False,
) -> tuple[CaseResult, BaselineRef | None]:
    """Measure the case of ``result`` (with ``runner``, default `run_case`) and judge it; returns
    the measured and judged result and its stored baseline. ``alone``: a lock-step side times
    it in one turn of its own (`CaseBench.through`), not block by block in turns, and a side
    measures it once more in that turn when it was `sides.disturbed`; ``wide``: in
    turns, on the CPUs of the side's untimed work (`turns.Baton.ready`)."""
    settings = bench.settings
    result, judging = judging_for(bench, result)
    ref = judging[0]
    judged_as = _outcome_of(result, judging)

    def again(best: Measurement) -> bool:
        # Update mode always takes every attempt (the baseline is a best-of-N).
        return settings.update or worth_another_attempt(judged_as(best), best)

    config = measure_config(bench, str(result.key), alone, wide)

    def suspect(best: Measurement) -> bool:
        # Profile a case judged regressed (or, in a paired run's side asked to profile, every
        # case: `paired.rounds.run_rounds`):
        # after its timed blocks, with the step still warm.
        if bench.session.side is not None:
            return bench.session.side.profile
        return not settings.update and judged_as(best) == Outcome.REGRESSED

    diagnose = diagnosis.DiagnoseSpec(
        trace_path=diagnosis.trace_path_for(settings.profile, str(result.key)),
        profile_if=suspect,
    )
    attempts = 1 + settings.confirm
    if bench.session.side is not None and alone:
        attempts, again = 2, disturbed
    if runner is None:
        runner = functools.partial(_run_case, bench.backend, net, diagnose=diagnose)
    outcome = _measured(runner, spec, config, attempts, again, str(result.key))
    peak = _peak(bench, outcome, spec, result.dtype)
    result = replace(
        diagnosis.applied(result, outcome.diagnosis),
        status=outcome.status,
        measurement=outcome.measurement,
        attempts=outcome.attempts,
        error=outcome.error,
        warnings=outcome.warnings,
        macs_per_image=outcome.macs_per_image,
        peak_gflops=peak,
    )
    for text in outcome.warnings:
        warnings.warn(f"mxperf: {result.key}: {text}", pytest.PytestWarning, stacklevel=4)
    return give_verdict(bench, result, judging), ref


def _outcome_of(result: CaseResult, judging: Judging) -> Callable[[Measurement], Outcome]:
    """The outcome ``result`` would have with a given best attempt, decided once per attempt:
    whether to measure again and whether to profile ask of the same one (the attempt is held
    beside its outcome, so its id is not reused meanwhile)."""
    ref, expectations, _, policy = judging
    decided: dict[int, tuple[Measurement, Outcome]] = {}

    def judged_as(best: Measurement) -> Outcome:
        if id(best) not in decided:
            judged = decide(replace(result, measurement=best), ref, expectations, policy)
            decided[id(best)] = (best, judged.outcome)
        return decided[id(best)][1]

    return judged_as


def _run_case(
    backend: Any,
    net: Any,
    spec: PrepareSpec,
    config: MeasureConfig,
    attempts: int,
    again: Callable[[Measurement], bool],
    diagnose: diagnosis.DiagnoseSpec,
) -> CaseRun:
    return run_case(backend, net, spec, config, attempts=attempts, again=again, diagnose=diagnose)


def _measured(
    runner: Runner,
    spec: PrepareSpec,
    config: MeasureConfig,
    attempts: int,
    again: Callable[[Measurement], bool],
    key: str,
) -> CaseRun:
    """The case measured by ``runner``; what cannot be benchmarked at all fails the test."""
    problem: SpecError | None = None
    try:
        return runner(spec, config, attempts, again)
    except SpecError as exc:
        problem = exc
    # What cannot be benchmarked at all says what to change: that message alone, not the back
    # end's traceback and chained causes around it (a labels= mismatch: ~126 lines). Failed
    # outside the except block, so no chain is printed.
    pytest.fail(f"mxperf: {key}: {type(problem).__name__}: {problem}", pytrace=False)


def timing_of(settings: Settings) -> MeasureConfig:
    """A case's timing as the run's settings give it (min/max time, warm-up time)."""
    return MeasureConfig(
        min_time=settings.min_time, max_time=settings.max_time, warmup_time=settings.warmup_time
    )


def measure_config(bench: Bench, key: str, alone: bool, wide: bool) -> MeasureConfig:
    """How a case is timed: the run's settings; in a paired side, its shorter blocks and the
    case's block plan; in lock-step turns (unless ``alone``), block by block in turns."""
    config = timing_of(bench.settings)
    if bench.session.side is not None:
        config = for_side(config)
        steps = bench.session.block_plan.get(key)
        if steps is not None:
            config = replace(config, steps_per_block=steps)
    if bench.session.baton is not None and not alone:
        turns = CaseTurns(bench.session.baton, bench.item.nodeid, key, wide)
        config = replace(config, interleave=turns)
    return config


def _peak(bench: Bench, outcome: CaseRun, spec: PrepareSpec, dtype: str) -> float | None:
    """The device's matrix-multiply peak for a measured case with a MAC count."""
    if not (outcome.macs_per_image and outcome.status == Status.OK):
        return None
    # Still inside the device lock: the probe never runs beside another benchmark.
    device = bench.backend.describe(spec.ctx)
    return bench.session.peak_gflops(bench.backend, spec.ctx, device, dtype)


def judging_for(bench: Bench, result: CaseResult) -> tuple[CaseResult, Judging]:
    """``result`` with its software recorded, and what it is judged with: its stored
    baseline, the marker's expectations, why no paired run could confirm a drop (None: one
    can), and the policy that follows."""
    settings = bench.settings
    result, ref, expectations = bench.reference(result)
    why_not = None if ref is None else bench.session.why_no_pair(ref.commit.get("sha"))
    # Without a paired run to confirm it, a drop must clear the floor sized for noisy
    # shared runners; with one, the lower floor lets a quiet machine catch small losses.
    tolerance = settings.tolerance
    if why_not is not None:
        tolerance = max(tolerance, settings.unconfirmed_tolerance)
    return result, (ref, expectations, why_not, bench.policy(tolerance))


def give_verdict(bench: Bench, result: CaseResult, judging: Judging) -> CaseResult:
    """``result`` with its verdict from ``judging`` (`judging_for`)."""
    settings = bench.settings
    ref, expectations, why_not, policy = judging
    elsewhere = bench.run.baselines.elsewhere(result.hardware, str(result.key))
    verdict = judge(result, ref, expectations, policy, elsewhere)
    other = pairs.other_machine(bench.run.machine_id, ref)
    if verdict.outcome == Outcome.IMPROVED and other:
        # No pair looks at a case that got faster: the stored figure's machine is all it knows.
        verdict = verdict.adding(
            "the baseline was measured on another machine: this one may only be faster (no "
            "paired run checks an improvement)"
        )
    if why_not is not None and ref is not None:
        # Judged again at the threshold a pair would allow (not when storing a baseline).
        tight = (
            verdict
            if settings.update
            else judge(result, ref, expectations, bench.policy(settings.tolerance), elsewhere)
        )
        verdict = pairs.unconfirmed(
            verdict,
            tight,
            why_not,
            other,
            what_changed(result, ref),
        )
    return replace(result, verdict=verdict)


def judge_stored(bench: Bench, result: CaseResult) -> tuple[CaseResult, BaselineRef | None]:
    """Judge a case whose figure came from the run's joint pair (`preflight`) against its
    stored baseline, as a measured one is; returns it judged, and the baseline."""
    result, judging = judging_for(bench, result)
    return give_verdict(bench, result, judging), judging[0]
