"""The decision on a case, from numbers only: expectation floor, then the stored baseline.

A change smaller than the noise measured for the case is never a regression: the threshold is
the larger of the tolerance and twice the case's noise (the relative IQR of the current blocks,
of the baseline's blocks, and the spread of repeated baseline runs). Messages are written from
the verdict by `pytest_mxperf.judging.explain`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from pytest_mxperf.baselines.resolution import BaselineRef
from pytest_mxperf.baselines.store import StoredCase
from pytest_mxperf.config.expectation import Expectation
from pytest_mxperf.config.options import DEFAULTS
from pytest_mxperf.judging.pairstats import Decision, PairedEstimate
from pytest_mxperf.measuring.measure import MAX_REL_IQR, Measurement
from pytest_mxperf.measuring.records import CaseResult, Outcome, Status, Verdict
from pytest_mxperf.measuring.stats import rel_spread

#: The threshold is at least this many times the case's noise.
NOISE_FACTOR = 2.0
#: A threshold above this means the case cannot be judged at all.
MAX_THRESHOLD = 0.5


@dataclass(frozen=True)
class Policy:
    """How strict a verdict is. ``tolerance`` is the floor of the threshold against a stored
    baseline; ``floor_tolerance`` the default tolerance of a marker's expected figure."""

    tolerance: float = DEFAULTS["tolerance"]
    strict: bool = False
    update: bool = False
    floor_tolerance: float = DEFAULTS["unconfirmed_tolerance"]


def noise_of(result: CaseResult, ref: BaselineRef | None) -> float:
    """The relative noise of a comparison: the largest of the block spreads (IQR / median) of
    the current run and of the baseline, and half the range of the baseline's repeated run
    medians (so the threshold, twice the noise, spans that whole range)."""
    return stored_noise(result.rel_iqr, None if ref is None else ref.case)


def stored_noise(rel_iqr: float, base: StoredCase | None) -> float:
    """`noise_of` from a block spread and a stored baseline case."""
    parts = [rel_iqr]
    if base is not None:
        parts.append(base.rel_iqr)
        if len(base.runs) >= 2:
            parts.append(rel_spread(base.runs) / 2)
    return max(parts)


def stored_threshold(base: StoredCase, tolerance: float) -> float:
    """The least threshold a case judged against ``base`` can have, known before it is measured
    (its own block spread can only widen it, `compare_rates`): what a pair arbitrating it must
    rule out to clear it (`decide_arbitration_pair`)."""
    return threshold_of(stored_noise(0.0, base), tolerance)


def threshold_of(noise: float, tolerance: float) -> float:
    """A comparison's threshold: the tolerance, or twice the noise where that is wider."""
    return max(tolerance, NOISE_FACTOR * noise)


def compare_rates(
    rate: float, base_rate: float, noise: float, rel_iqr: float, policy: Policy
) -> tuple[Outcome, bool, float]:
    """``(outcome, failed, threshold)`` of a measured rate against a baseline rate."""
    change = rate / base_rate - 1
    threshold = threshold_of(noise, policy.tolerance)
    if rel_iqr > MAX_REL_IQR or threshold > MAX_THRESHOLD:
        # Too noisy to judge a change of the noise's size; a drop beyond twice the widest
        # spread is still a regression (an exchange that costs 88% of a step, blocks 29% apart).
        wide = max(threshold, NOISE_FACTOR * max(noise, rel_iqr))
        if change < -wide:
            return Outcome.REGRESSED, not policy.update, wide
        return Outcome.UNSTABLE, policy.strict and not policy.update, threshold
    if change < -threshold:
        return Outcome.REGRESSED, not policy.update, threshold
    if change > threshold:
        return Outcome.IMPROVED, False, threshold
    return Outcome.PASS, False, threshold


def failed_expectation(
    rate: float, expectations: Sequence[Expectation], policy: Policy
) -> Expectation | None:
    """The first expectation whose floor the measured rate is below."""
    return next((e for e in expectations if rate < e.floor(policy.floor_tolerance)), None)


def decide(
    result: CaseResult,
    ref: BaselineRef | None,
    expectations: Sequence[Expectation],
    policy: Policy,
) -> Verdict:
    """Decide a case's verdict (its message is left empty for `explain.explain`).

    :param ref: the resolved baseline of the case, or None when it has none.
    :param expectations: marker expectations that apply to this case on this hardware.
    """
    if result.status == Status.NAN:
        return Verdict(Outcome.NAN, True)
    if result.status == Status.ERROR:
        return Verdict(Outcome.ERROR, True)
    base_rate = None if ref is None else ref.case.images_per_sec
    sha = None if ref is None else ref.commit.get("sha")
    rate = result.images_per_sec
    if result.status == Status.OOM or rate is None:
        if ref is not None and base_rate is not None:
            return Verdict(
                Outcome.REGRESSED,
                not policy.update,
                baseline_images_per_sec=base_rate,
                baseline_commit=sha,
            )
        return Verdict(Outcome.OOM, False)

    # The declared expectation is a floor, independent of any baseline.
    below = failed_expectation(rate, expectations, policy)
    if below is not None:
        return Verdict(Outcome.BELOW, True, expected=below.images_per_sec)
    expected = expectations[0].images_per_sec if expectations else None

    if ref is None:
        return Verdict(Outcome.NEW, policy.strict and not policy.update, expected=expected)
    if base_rate is None:
        return Verdict(Outcome.IMPROVED, False, baseline_commit=sha, expected=expected)

    noise = noise_of(result, ref)
    outcome, failed, threshold = compare_rates(rate, base_rate, noise, result.rel_iqr, policy)
    return Verdict(
        outcome,
        failed,
        change=rate / base_rate - 1,
        threshold=threshold,
        noise=noise,
        baseline_images_per_sec=base_rate,
        baseline_commit=sha,
        expected=expected,
    )


def decide_paired(estimate: PairedEstimate | None, policy: Policy) -> Verdict:
    """The verdict of a paired run from its estimate (None: no round measured both sides)."""
    if estimate is None:
        return Verdict(Outcome.NEW, policy.strict)
    outcome = {
        Decision.REGRESSED: Outcome.REGRESSED,
        Decision.IMPROVED: Outcome.IMPROVED,
        Decision.SAME: Outcome.PASS,
        Decision.NOT_SLOWER: Outcome.PASS,
        Decision.UNKNOWN: Outcome.INCONCLUSIVE,
    }[estimate.decision]
    failed = outcome == Outcome.REGRESSED or (outcome == Outcome.INCONCLUSIVE and policy.strict)
    # The interval that decided: a pass rests on the equivalence interval (its message names
    # both); the 99% one, two rounds in, can be ten times as wide and would read as noise.
    same = outcome == Outcome.PASS
    return Verdict(
        outcome,
        failed,
        change=estimate.ratio - 1,
        interval=(estimate.same_low, estimate.same_high) if same else (estimate.low, estimate.high),
        interval_level=estimate.same_level if same else estimate.confidence,
        # The 99% interval's t quantile always takes n - 1 (`pairstats.paired_estimate`).
        interval_df=estimate.df if same else estimate.n_rounds - 1,
        rounds=estimate.n_rounds,
    )


def decide_arbitration_pair(
    estimate: PairedEstimate | None, stored: Verdict, policy: Policy
) -> Verdict:
    """The verdict of the pair that arbitrates a stored verdict (`decide_paired`), where an
    undecided pair whose equivalence interval rules out a loss as large as the stored verdict's
    own threshold passes: the stored figure failed the case for a loss beyond that threshold,
    and the pair shows the code is not slower by that much (the threshold of a case whose
    blocks are noisy is wider than the minimum effect; on its own machine the stored gate could
    not have failed a smaller loss either). A loss the pair is sure of still fails at the
    minimum effect; what passes here was inconclusive before (failed only by
    ``--mxperf-strict``)."""
    pair = decide_paired(estimate, policy)
    threshold = stored.threshold
    if (
        estimate is None
        or pair.outcome != Outcome.INCONCLUSIVE
        or threshold is None
        or stored.scaling
        or not estimate.rules_out_wider(threshold)
    ):
        return pair
    return replace(
        pair,
        outcome=Outcome.PASS,
        failed=False,
        interval=(estimate.same_low, estimate.same_high),
        interval_level=estimate.same_level,
        interval_df=estimate.df,
    )


def worth_another_attempt(outcome: Outcome, measured: Measurement) -> bool:
    """Whether a case judged ``outcome`` on ``measured`` is worth measuring again (up to
    ``--mxperf-confirm`` times): a suspected regression, or a case "unstable" for its own
    blocks' spread (a moment of the machine's, which another attempt usually misses; the best
    attempt then is the fastest steady one, `runner.better_attempt`). Not one unstable for the
    baseline's noise: no attempt changes that."""
    return outcome == Outcome.REGRESSED or (outcome == Outcome.UNSTABLE and not measured.steady)


def suspected(
    verdict: Verdict, tolerance: float, machine: float | None = None, explained: float | None = None
) -> bool:
    """Whether a stored-baseline verdict is worth a paired run: regressed, or slower by more than
    half the floor though it passed. The stored figure was measured in another process at
    another time; on a shared VM that alone moves a case by 2-10%, so a real loss of the floor's
    size can show as half of it (the pair has its own, better, handle on noise: rounds measured
    back to back, and only a loss it is sure of fails).

    ``machine``: how fast this machine runs now against when the figures were stored (0.97:
    3% slower; the probe's, or the run's own cases': `run.preflight.Preflight.hour`). A
    passing case's drop is first discounted by the machine's own, up to ``explained`` (half
    the floor unless the run's earlier pairs showed the hour explains more:
    `run.preflight.Preflight.explained`): on a slower hour every case is a few percent below
    its figure, which the hour explains and no pair needs to (at the 5% floor, a case is
    paired from -2.5% on a steady machine, from -5% on a slower one until pairs confirm the
    hour, then from 2.5% beyond it). A regressed verdict (beyond its threshold) is paired
    whatever the hour."""
    if verdict.outcome == Outcome.REGRESSED:
        return True
    change = verdict.change
    cap = tolerance / 2 if explained is None else explained
    slower = 0.0 if machine is None else min(max(1.0 - machine, 0.0), cap)
    return (
        verdict.outcome in (Outcome.PASS, Outcome.UNSTABLE)
        and change is not None
        and change < -tolerance / 2 - slower
    )


def decide_arbitrated(
    stored: Verdict, pair: Verdict | None, environment_changed: bool, update: bool = False
) -> Verdict:
    """A suspected stored-baseline regression after a paired run of the baseline commit on this
    machine: confirmed -> regressed (also when the stored threshold, widened by noise, had let
    it pass); cleared -> ``machine`` (passes) for a stored regression; undecided -> inconclusive
    (failed as the pair is: under ``--mxperf-strict``).
    When the software or environment changed since the baseline and the pair did not
    reproduce the baseline's (``environment_changed``), a pair that does not confirm the loss
    clears nothing: it judged code only, and the drop may be the change, so a stored
    regression stands. Without a pair the stored verdict stands."""
    if pair is None or pair.outcome == Outcome.NEW:
        return stored
    interval, rounds = pair.interval, pair.rounds
    stored = replace(stored, interval_level=pair.interval_level, interval_df=pair.interval_df)
    if pair.outcome == Outcome.REGRESSED:
        return replace(
            stored,
            outcome=Outcome.REGRESSED,
            failed=not update,
            interval=interval,
            rounds=rounds,
        )
    cleared = pair.outcome in (Outcome.PASS, Outcome.IMPROVED)
    if stored.outcome == Outcome.UNSTABLE and cleared and not environment_changed:
        # Its own blocks were too spread to judge; the pair's rounds were not: no loss.
        return replace(stored, outcome=Outcome.PASS, failed=False, interval=interval, rounds=rounds)
    if stored.outcome != Outcome.REGRESSED:
        return replace(stored, interval=interval, rounds=rounds)  # the pair agrees: no loss
    if environment_changed:
        return replace(stored, interval=interval, rounds=rounds)
    if pair.outcome == Outcome.INCONCLUSIVE:  # fails only under --mxperf-strict (the pair's)
        failed = pair.failed and not update
        return replace(
            stored, outcome=Outcome.INCONCLUSIVE, failed=failed, interval=interval, rounds=rounds
        )
    return replace(stored, outcome=Outcome.MACHINE, failed=False, interval=interval, rounds=rounds)


def decide_same_code(stored: Verdict, environment_changed: bool) -> Verdict:
    """A suspected stored-baseline regression when the code is the baseline commit's: nothing a
    paired run could measure differs, so the drop is the machine's (``machine``, passes) unless
    the software or environment changed since the baseline (then the stored verdict stands,
    as the change may be the cause)."""
    if stored.outcome != Outcome.REGRESSED or environment_changed:
        return stored
    return replace(stored, outcome=Outcome.MACHINE, failed=False)


def efficiency_noise(result: CaseResult, ref: BaselineRef | None) -> float:
    """The relative noise of a scaling efficiency, img/s(N) / (N x img/s(1)): a ratio of two
    independently measured rates, so their relative noises add in quadrature (now and in the
    baseline, the larger of each)."""
    single = 0.0 if result.scaling is None else result.scaling.single_rel_iqr
    stored_single = 0.0 if ref is None else ref.case.single_rel_iqr
    return math.hypot(noise_of(result, ref), max(single, stored_single))


def decide_scaling(
    verdict: Verdict,
    result: CaseResult,
    ref: BaselineRef | None,
    floor: float | None,
    policy: Policy,
) -> Verdict:
    """Add the scaling gates to the verdict on a data-parallel case's aggregate img/s: the
    marker's efficiency floor (``efficiency={N: floor}``), then a drop of the efficiency
    against the stored one beyond its noise, judged like a throughput drop. A failure the
    verdict already has (error, NaN, OOM, a missed expectation) stands."""
    scaling = result.scaling
    if scaling is None or verdict.outcome in (Outcome.NAN, Outcome.ERROR, Outcome.OOM):
        return verdict
    if verdict.outcome == Outcome.BELOW:
        return verdict
    base = None if ref is None else ref.case.efficiency
    verdict = replace(
        verdict,
        efficiency_floor=floor,
        baseline_efficiency=base,
        baseline_comm_share=None if ref is None else ref.case.comm_share,
    )
    if floor is not None and scaling.efficiency < floor:
        return replace(verdict, outcome=Outcome.BELOW, failed=True, scaling=True)
    if base is None:
        return verdict
    noise = efficiency_noise(result, ref)
    outcome, failed, threshold = compare_rates(
        scaling.efficiency, base, noise, result.rel_iqr, policy
    )
    verdict = replace(
        verdict, efficiency_change=scaling.efficiency / base - 1, efficiency_threshold=threshold
    )
    if outcome == Outcome.REGRESSED:
        # Whether or not the aggregate dropped too, the message leads with the scaling.
        failed = failed or verdict.failed
        return replace(verdict, outcome=Outcome.REGRESSED, failed=failed, scaling=True)
    return verdict
