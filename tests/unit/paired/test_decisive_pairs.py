"""Decisive pairs: the controller buys block pairs where a round's ratio is uncertain, and the
equivalence interval takes its degrees of freedom from the blocks when the rounds agree."""

from __future__ import annotations

import math

import pytest
from paired_data import pairs_of

from pytest_mxperf.judging.pairstats import Decision, PairedRound, paired_estimate
from pytest_mxperf.measuring.stats import paired_blocks
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
    # Blocks 15% apart at random on both sides: the ratio's SE stays above 1%.
    noisy = {"rev": [100.0, 85.0, 97.0, 118.0, 91.0, 104.0, 80.0], "head": [92.0, 110.0, 99.0]}
    order = _time_case(c, noisy)
    assert len(order) == 30  # 15 pairs: 5, then 2 at a time
    pairs = [tuple(order[i : i + 2]) for i in range(0, 30, 2)]
    assert pairs == [("rev", "head") if i % 2 == 0 else ("head", "rev") for i in range(15)]


def test_pairs_stop_once_the_round_is_certain_enough() -> None:
    c = Conductor(("rev", "head"), IDS, pairs=5, max_pairs=15, target_se=0.01)
    # Two bursts hit HEAD's first blocks (8% and 7% slow): the ratio's SE is 1.9% at 5 pairs,
    # 1.45% at 7, 1.16% at 9 and 0.96% at 11, where the pairs stop.
    rev = [100.0] * 15
    head = [92.0, 93.0, 100.5, 99.5, 100.2, 99.8, 100.1, 100.0, 100.0, 100.3, 99.9, 100.0]
    order = _time_case(c, {"rev": rev, "head": head})
    assert len(order) == 22
    assert paired_blocks(rev[:11], head[:11]).se <= 0.01 < paired_blocks(rev[:9], head[:9]).se


def test_sides_that_report_no_rate_keep_the_fixed_pairs() -> None:
    c = Conductor(("rev", "head"), IDS, pairs=3, max_pairs=15, target_se=0.0)
    turns = _locked(c)
    n = 0
    while turns and turns[0][1] == BLOCK:
        n += 1
        turns = c.event(turns[0][0], {"done": 1})
    assert n == 6 and turns == [("rev", END)]


def test_a_loss_in_lumps_counts_in_full() -> None:
    # One step in 20 does twice the work: a block of 5 steps that holds it takes 6 steps' time
    # (every fourth block), the others are not slower at all. HEAD's throughput over the round
    # is 5% lower, and so is the round's ratio: REV has no slow blocks to match them, so none is
    # left out (a trimmed mean or a median would leave them out and see almost nothing).
    rev = (100.0, 100.4, 99.8, 100.1, 99.9, 100.2) * 2
    head = (100.0 * 5 / 6, 100.3, 99.7, 100.0) * 3
    rnd = PairedRound(100.0, 100.0, pairs=tuple(zip(rev, head)))
    assert rnd.ratio == pytest.approx(20 / 21, rel=2e-3)
    assert rnd.blocks is not None and rnd.blocks.used == 12
    assert rnd.within_df == 11


def test_bursts_on_both_sides_are_left_out_in_matched_numbers() -> None:
    # A neighbour slowed two of REV's blocks and one of HEAD's by about half: one of each
    # side's slowest goes (the machine's), REV's second burst stays and widens the error.
    rev = [100.0, 50.0, 100.2, 99.8, 100.1, 55.0, 99.9, 100.3, 99.7]
    head = [99.9, 100.1, 100.0, 52.0, 99.8, 100.2, 100.1, 99.9, 100.0]
    blocks = paired_blocks(rev, head)
    assert blocks.used == 7
    kept = [(r, h) for i, (r, h) in enumerate(zip(rev, head)) if i not in (1, 3)]
    t_rev = sum(1 / r for r, _ in kept) / 7
    t_head = sum(1 / h for _, h in kept) / 7
    assert blocks.log_ratio == pytest.approx(math.log(t_rev / t_head))
    assert blocks.log_ratio > 0.05  # REV's second burst: HEAD looks faster, with a wide error
    assert blocks.se > 0.05
    # Identical code, mirrored: the same rule for both sides, the opposite ratio.
    mirrored = paired_blocks(head, rev)
    assert mirrored.log_ratio == pytest.approx(-blocks.log_ratio)
    assert mirrored.used == 7


def test_few_blocks_leave_no_outlier_out() -> None:
    # Five pairs: REV's 3% slower block is infinitely many SDs off by the MAD of its blocks
    # (four are alike); matched against HEAD's lump it would take the lump out of the ratio and
    # out of the error that buys the round more pairs. Below 7 blocks nothing is left out.
    rev, head = [100.0, 97.0, 100.0, 100.0, 100.0], [100.0 * 5 / 6, *[100.0] * 4]
    blocks = paired_blocks(rev, head)
    assert blocks.used == 5
    assert blocks.log_ratio < -0.02 and blocks.se > 0.02
    # Seven blocks, one 0.3% slower on REV: under the 0.5% floor of the robust SD, no outlier.
    rev7, head7 = [100.0, 99.7, *[100.0] * 5], [100.0 * 5 / 6, *[100.0] * 6]
    assert paired_blocks(rev7, head7).used == 7


def test_a_burst_widens_the_rounds_error_instead_of_vanishing() -> None:
    quiet = [0.01, -0.01, 0.005, -0.005, 0.0, 0.002, -0.002, 0.004, -0.004, 0.001]
    hit = [*quiet[:-1], math.log(0.5)]  # one block at half speed, on HEAD only
    rev = [100.0] * 10
    quiet_se = paired_blocks(rev, [h for _, h in pairs_of(quiet)]).se
    assert paired_blocks(rev, [h for _, h in pairs_of(hit)]).se > 5 * quiet_se
    assert quiet_se == pytest.approx(
        math.sqrt(sum((x - sum(quiet) / 10) ** 2 for x in quiet) / 9) / math.sqrt(10), rel=0.02
    )
    with pytest.raises(ValueError, match="two or more pairs"):
        paired_blocks([100.0], [100.0])


def _round(center: float, spread: float, n: int = 9) -> PairedRound:
    """A round of n block pairs around ``center`` (log ratio) with a symmetric spread."""
    logs = tuple(center + spread * (i - (n - 1) / 2) / ((n - 1) / 2) for i in range(n))
    return PairedRound(100.0, 100.0 * math.exp(center), pairs=pairs_of(logs))


def test_rounds_that_agree_as_their_blocks_predict_pass_in_three() -> None:
    rounds = [_round(0.004, 0.15), _round(-0.003, 0.15), _round(0.001, 0.15)]
    est = paired_estimate(rounds)
    assert est.sd_within > est.sd_between
    assert est.df == sum(r.within_df for r in rounds) == 3 * (9 - 1)
    assert est.decision is Decision.SAME
    assert est.same_low > 0.95 and est.same_high < 1.05
    # With the rounds' own 2 degrees of freedom the 90% interval would be t(0.95, 2) = 2.92
    # standard errors wide each way: more than the +-5% band, undecided.
    assert 2.92 * est.sd / math.sqrt(3) > 0.05
    # Failing still takes the rounds' degrees of freedom: the 99% interval is t(0.995, 2) wide.
    assert math.log(est.high / est.ratio) == pytest.approx(9.925 * est.sd / math.sqrt(3), rel=1e-3)


def test_rounds_that_disagree_more_than_their_blocks_keep_the_rounds_freedom() -> None:
    rounds = [_round(0.035, 0.01), _round(-0.035, 0.01), _round(0.0, 0.01)]
    est = paired_estimate(rounds)
    assert est.sd_between > est.sd_within
    assert est.df == 2
    assert est.decision is Decision.UNKNOWN  # t(0.95, 2) = 2.92 standard errors: beyond -5%
