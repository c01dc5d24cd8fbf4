"""Decisive pairs: the controller buys block pairs where a round's ratio is uncertain, and the
equivalence interval takes its degrees of freedom from the blocks when the rounds agree."""

from __future__ import annotations

import math

import pytest

from pytest_mxperf.judging.pairstats import (
    Decision,
    PairedRound,
    paired_estimate,
    trimmed_mean,
    trimmed_mean_se,
)
from pytest_mxperf.paired.turns import BLOCK, END, Conductor

IDS = ["t.py::a", "t.py::b"]


def _locked(c: Conductor) -> list[tuple[str, str]]:
    """Both sides hello and ready for case A; returns the first turn of the lock-step."""
    c.event("rev", {"hello": "rev"})
    c.event("head", {"hello": "head"})
    c.event("rev", {"ready": "A", "nodeid": IDS[0]})
    return c.event("head", {"ready": "A", "nodeid": IDS[0]})


def _time_case(c: Conductor, rate: dict[str, list[float]]) -> list[str]:
    """Answer every BLOCK with the side's next rate; returns the sides in the order they timed,
    until the case's lock-step ends."""
    turns = _locked(c)
    order: list[str] = []
    used = {"rev": 0, "head": 0}
    while turns and turns[0][1] == BLOCK:
        ((side, _),) = turns
        order.append(side)
        value = rate[side][used[side] % len(rate[side])]
        used[side] += 1
        turns = c.event(side, {"done": 1, "rate": value})
    assert turns == [("rev", END)]  # the case is over: REV goes on to its next case
    return order


def test_a_quiet_case_stops_at_the_minimum_pairs() -> None:
    c = Conductor(("rev", "head"), IDS, pairs=5, max_pairs=15, target_se=0.01)
    order = _time_case(c, {"rev": [100.0, 100.4, 99.8], "head": [100.2, 99.9, 100.1]})
    assert len(order) == 10
    assert order[:4] == ["rev", "head", "head", "rev"]


def test_a_noisy_case_gets_pairs_two_at_a_time_up_to_the_most_abba_kept() -> None:
    c = Conductor(("rev", "head"), IDS, pairs=5, max_pairs=15, target_se=0.01)
    # Blocks 15% apart at random on both sides: the trimmed mean's SE stays above 1%.
    noisy = {"rev": [100.0, 85.0, 97.0, 118.0, 91.0, 104.0, 80.0], "head": [92.0, 110.0, 99.0]}
    order = _time_case(c, noisy)
    assert len(order) == 30  # 15 pairs: 5, then 2 at a time
    pairs = [tuple(order[i : i + 2]) for i in range(0, 30, 2)]
    assert pairs == [("rev", "head") if i % 2 == 0 else ("head", "rev") for i in range(15)]


def test_pairs_stop_once_the_round_is_certain_enough() -> None:
    c = Conductor(("rev", "head"), IDS, pairs=5, max_pairs=15, target_se=0.01)
    # Two bursts hit HEAD's first blocks: the trimmed mean leaves one pair out at each end of
    # 5, 7 or 9 pairs, two of 11: the pairs go on to 11, where its SE falls below 1%.
    rev = [100.0] * 15
    head = [70.0, 75.0, 100.5, 99.5, 100.2, 99.8, 100.1, 100.0, 100.0, 100.3, 99.9, 100.0]
    order = _time_case(c, {"rev": rev, "head": head})
    assert len(order) == 22
    logs = [math.log(h / r) for r, h in zip(rev, head[:11])]
    assert trimmed_mean_se(logs) <= 0.01 < trimmed_mean_se(logs[:9])


def test_sides_that_report_no_rate_keep_the_fixed_pairs() -> None:
    c = Conductor(("rev", "head"), IDS, pairs=3, max_pairs=15, target_se=0.0)
    turns = _locked(c)
    n = 0
    while turns and turns[0][1] == BLOCK:
        n += 1
        turns = c.event(turns[0][0], {"done": 1})
    assert n == 6 and turns == [("rev", END)]


def test_the_trimmed_mean_and_its_error_shrug_off_one_burst() -> None:
    quiet = [0.01, -0.01, 0.005, -0.005, 0.0, 0.002, -0.002, 0.004, -0.004, 0.001]
    hit = [*quiet[:-1], math.log(0.5)]  # one block at half speed
    assert trimmed_mean(hit) == pytest.approx(trimmed_mean(quiet), abs=0.002)
    assert trimmed_mean_se(hit) < 2 * trimmed_mean_se(quiet)
    sd = math.sqrt(sum((x - sum(hit) / 10) ** 2 for x in hit) / 9)
    assert sd / math.sqrt(10) > 10 * trimmed_mean_se(hit)  # what a plain SE would have said


def _round(center: float, spread: float, n: int = 9) -> PairedRound:
    """A round of n block pairs around ``center`` (log ratio) with a symmetric spread."""
    logs = tuple(center + spread * (i - (n - 1) / 2) / ((n - 1) / 2) for i in range(n))
    return PairedRound(100.0, 100.0 * math.exp(center), pair_logs=logs)


def test_rounds_that_agree_as_their_blocks_predict_pass_in_three() -> None:
    rounds = [_round(0.004, 0.15), _round(-0.003, 0.15), _round(0.001, 0.15)]
    est = paired_estimate(rounds)
    assert est.sd_within > est.sd_between
    assert est.df == sum(r.within_df for r in rounds) == 3 * (9 - 2 - 1)
    assert est.decision is Decision.SAME
    assert est.same_low > 0.95 and est.same_high < 1.05
    # With the rounds' own 2 degrees of freedom the 90% interval would be t(0.95, 2) = 2.92
    # standard errors wide each way: more than the +-5% band, undecided.
    assert 2.92 * est.sd / math.sqrt(3) > 0.05
    # Failing still takes the rounds' degrees of freedom: the 99% interval is t(0.995, 2) wide.
    assert math.log(est.high / est.ratio) == pytest.approx(9.925 * est.sd / math.sqrt(3), rel=1e-3)


def test_rounds_that_disagree_more_than_their_blocks_keep_the_rounds_freedom() -> None:
    rounds = [_round(0.03, 0.01), _round(-0.03, 0.01), _round(0.0, 0.01)]
    est = paired_estimate(rounds)
    assert est.sd_between > est.sd_within
    assert est.df == 2
    assert est.decision is Decision.UNKNOWN
