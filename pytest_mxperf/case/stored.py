"""A case measured here, and judged against its stored baseline where this process judges: the
run under the device lock as the role's `Tries` say (the stored judge's: measured again while a
regression is suspected or its blocks spread too far to judge, profiled when one is found), then
the verdict, at the threshold a paired run would allow or, without one, the higher floor
(`pytest_mxperf.case.roles` calls these)."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional

import pytest

from pytest_mxperf.baselines.resolution import BaselineRef
from pytest_mxperf.case import jointpair, pairs
from pytest_mxperf.case.bench import Bench, Runner
from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.config.expectation import Expectation
from pytest_mxperf.config.settings import Settings
from pytest_mxperf.judging.changes import what_changed
from pytest_mxperf.judging.decisions import Policy, decide, worth_another_attempt
from pytest_mxperf.judging.explain import judge
from pytest_mxperf.measuring import diagnosis
from pytest_mxperf.measuring.measure import MeasureConfig, Measurement
from pytest_mxperf.measuring.protocol import PrepareSpec, SpecError
from pytest_mxperf.measuring.records import CaseResult, Outcome, Status, Verdict
from pytest_mxperf.measuring.runner import CaseRun, run_case
from pytest_mxperf.measuring.verdicts import Judged, message_lines
from pytest_mxperf.paired.pairdata import PairedData
from pytest_mxperf.paired.turns import CaseTurns

#: A case's stored baseline, the marker's expectations, why no pair can confirm a drop, and
#: the policy (`judging_for`). Optional, not ``X | None``: this alias is evaluated at import,
#: and Python 3.9 has no ``|`` between types.
Judging = tuple[Optional[BaselineRef], list[Expectation], Optional[str], Policy]


@dataclass(frozen=True)
class Tries:
    """How this process tries a case (the role's: `roles.CaseRole.tries`): its timing, how many
    attempts, whether to take another after the best so far, whether to profile the best, and
    whether to probe the device's peak (a paired run's side reports img/s alone)."""

    config: MeasureConfig
    attempts: int
    again: Callable[[Measurement], bool]
    profile_if: Callable[[Measurement], bool]
    peak: bool = True
    #: In a lock-step side, the whole measurement is one turn of the baton (`CaseBench.through`).
    alone: bool = False
    #: The decision already made of a measured result's kept attempt (`Decisions.kept`).
    decided: Callable[[CaseResult], Verdict | None] = lambda _: None


#: A suspected regression's re-measure that raised the best figure by no more than this share
#: of the floor found the case as slow again; one further below its threshold than that is
#: beyond what another attempt of the same process moves (`settled_regression`).
SETTLED_SHARE = 0.25


def settled_regression(bests: Sequence[float], tolerance: float, clears_at: float | None) -> bool:
    """Whether a suspected regression, its best figure after each attempt so far ``bests``
    (images/sec, in order), is settled in this process: the last attempt raised the best by
    at most `SETTLED_SHARE` of the floor ``tolerance``, and the best is further than that below
    ``clears_at``, the figure at which it would pass (None: not known, not settled). Attempts of
    one process agree within a few percent (docs/measurements.md, "The cost of a decision"): a
    re-measure that found the case as slow again seldom sees a third find it fast enough, and
    where a paired run arbitrates the suspect anyway, a third attempt only costs time (most
    suspects of a slower hour, every case of a real loss)."""
    if len(bests) < 2 or bests[-2] <= 0 or clears_at is None:
        return False
    margin = 1 + SETTLED_SHARE * tolerance
    return bests[-1] <= bests[-2] * margin and bests[-1] * margin < clears_at


def judged_tries(bench: Bench, result: CaseResult, judging: Judging, alone: bool) -> Tries:
    """A case judged here against ``judging``: measured again while a regression is suspected or
    its blocks spread too far to judge (`worth_another_attempt`), profiled when judged
    regressed (after its timed blocks, with the step still warm). Where a paired run will
    arbitrate a suspected regression, no more once a re-measure found it as slow
    (`settled_regression`); where none can, every attempt is taken."""
    settings = bench.settings
    decisions = Decisions(result, judging)
    # A pair will arbitrate a suspect: a re-measure that found it as slow settles it here.
    arbitrated = judging[0] is not None and judging[2] is None
    bests: list[float] = []  # the best attempt's images/sec after each attempt

    def again(best: Measurement) -> bool:
        # Update mode always takes every attempt (the baseline is a best-of-N).
        if settings.update:
            return True
        verdict = decisions.of(best)
        bests.append(best.items_per_sec)
        base, threshold = verdict.baseline_images_per_sec, verdict.threshold
        clears_at = None if base is None or threshold is None else base * (1 - threshold)
        settled = arbitrated and settled_regression(bests, settings.tolerance, clears_at)
        if verdict.outcome == Outcome.REGRESSED and settled:
            return False
        return worth_another_attempt(verdict.outcome, best)

    def suspect(best: Measurement) -> bool:
        return not settings.update and decisions.of(best).outcome == Outcome.REGRESSED

    config, attempts = timing_of(settings), 1 + settings.confirm
    return Tries(config, attempts, again, suspect, alone=alone, decided=decisions.kept)


@dataclass(frozen=True)
class PlainStep:
    """The measuring step of a plain case (`CaseBench.case`; a `roles.Measure`): its figures
    taken from the run's ``joint`` pair where that measured it, else measured here; judged
    apart (`judge`) when the role judges. ``wide``: in lock-step turns, on the CPUs of the
    side's untimed work (`turns.Baton.ready`)."""

    bench: Bench
    net: Any
    spec: PrepareSpec
    runner: Runner | None
    ctx: Any
    joint: PairedData | None
    wide: bool

    def __call__(self, result: CaseResult, judging: Judging | None, tries: Tries) -> CaseResult:
        bench = self.bench
        # Under --mxperf-update no joint pair runs (`jointpair.joint_pair`): nothing adopted.
        calibration = result.calibration
        if bench.settings.update:
            calibration = jointpair.for_update(bench, result, self.ctx)
        adopted = None if self.joint is None else pairs.adopt_head(result, self.joint)
        if adopted is not None and judging is not None:
            return adopted  # its figures are HEAD's from the pair
        config = in_turns(bench, tries.config, result.key, tries.alone, self.wide)
        return measure(bench, result, self.net, self.spec, self.runner, tries, config, calibration)

    def judge(self, measured: CaseResult, judging: Judging, tries: Tries) -> Judged:
        """The verdict of the ``measured`` case, as far as the stored baseline gives it."""
        return give_verdict(self.bench, measured, judging, tries.decided(measured))


def measure(
    bench: Bench,
    result: CaseResult,
    net: Any,
    spec: PrepareSpec,
    runner: Runner | None,
    tries: Tries,
    config: MeasureConfig,
    calibration: float | None,
) -> CaseResult:
    """The case of ``result`` measured (with ``runner``, default `run_case`) as ``tries`` says,
    timed as ``config`` (``tries.config`` in turns where it takes them): the record with its
    figures, the software they were measured with and the ``calibration`` beside it."""
    diagnose = diagnosis.DiagnoseSpec(
        trace_path=diagnosis.trace_path_for(bench.settings.profile, result.key),
        profile_if=tries.profile_if,
    )
    if runner is None:
        runner = functools.partial(_run_case, bench.backend, net, diagnose=diagnose)
    outcome = _measured(runner, spec, config, tries.attempts, tries.again, result.key)
    peak = _peak(bench, outcome, spec, result.dtype) if tries.peak else None
    for text in outcome.warnings:
        warnings.warn(f"mxperf: {result.key}: {text}", pytest.PytestWarning, stacklevel=5)
    return replace(
        result,
        software=bench.backend.software(),
        status=outcome.status,
        measurement=outcome.measurement,
        attempts=outcome.attempts,
        error=outcome.error,
        warnings=outcome.warnings,
        macs_per_image=outcome.macs_per_image,
        peak_gflops=peak,
        calibration=calibration,
        **diagnosis.taken(result, outcome.diagnosis),
    )


class Decisions:
    """The verdicts ``result`` would have with a given best attempt, decided once per attempt:
    whether to measure again, whether to profile, and the verdict of the attempt kept ask of
    the same decision (each attempt is held beside its verdict, so its id is not reused)."""

    def __init__(self, result: CaseResult, judging: Judging) -> None:
        self.result = result
        self.judging = judging
        self._decided: dict[int, tuple[Measurement, Verdict]] = {}

    def of(self, best: Measurement) -> Verdict:
        if id(best) not in self._decided:
            ref, expectations, _, policy = self.judging
            r = self.result
            # A decision reads the status and the measurement alone: the case with this
            # attempt, before its record is assembled.
            attempt = CaseResult(key=r.key, device=r.device, hardware=r.hardware, measurement=best)
            self._decided[id(best)] = (best, decide(attempt, ref, expectations, policy))
        return self._decided[id(best)][1]

    def kept(self, result: CaseResult) -> Verdict | None:
        """The decision already made of ``result``'s measurement (None: none was made). A
        decision reads the status and the measurement alone, the same here as when decided."""
        m = result.measurement
        found = None if m is None else self._decided.get(id(m))
        if found is None or found[0] is not m or result.status != Status.OK:
            return None
        return found[1]


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
    key: CaseKey,
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


def in_turns(
    bench: Bench, config: MeasureConfig, key: CaseKey, alone: bool, wide: bool
) -> MeasureConfig:
    """``config`` in lock-step turns, block by block (a paired run's side with a baton), unless
    the case is timed ``alone`` in a turn of its own."""
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


def judging_for(bench: Bench, result: CaseResult) -> Judging:
    """What ``result``'s case is judged with: its stored baseline, the marker's expectations,
    why no paired run could confirm a drop (None: one can), and the policy that follows."""
    settings = bench.settings
    ref, expectations = bench.reference(result)
    why_not = None if ref is None else bench.session.why_no_pair(ref.commit.get("sha"))
    # Without a paired run to confirm it, a drop must clear the floor sized for noisy
    # shared runners; with one, the lower floor lets a quiet machine catch small losses.
    tolerance = settings.tolerance
    if why_not is not None:
        tolerance = max(tolerance, settings.unconfirmed_tolerance)
    return ref, expectations, why_not, bench.policy(tolerance)


def give_verdict(
    bench: Bench, result: CaseResult, judging: Judging, decided: Verdict | None = None
) -> Judged:
    """The verdict of the measured ``result`` from ``judging`` (`judging_for`), before its
    evidence: the decision and its message; ``decided``: the decision, where the attempts
    already made it."""
    settings = bench.settings
    ref, expectations, why_not, policy = judging
    elsewhere = bench.run.baselines.elsewhere(result.hardware, result.key)
    judged = judge(result, ref, expectations, policy, elsewhere, decided)
    verdict = judged.decision
    other = pairs.other_machine(bench.run.machine_id, ref)
    if verdict.outcome == Outcome.IMPROVED and other:
        # No pair looks at a case that got faster: the stored figure's machine is all it knows.
        note = (
            "the baseline was measured on another machine: this one may only be faster (no "
            "paired run checks an improvement)"
        )
        judged = Judged(verdict, judged.lines + message_lines(note))
    if why_not is None or ref is None:
        return judged
    # Decided again at the threshold a pair would allow (not when storing a baseline).
    tight = (
        verdict
        if settings.update
        else judge(result, ref, expectations, bench.policy(settings.tolerance)).decision
    )
    return pairs.unconfirmed(judged, tight, why_not, other, what_changed(result, ref))
