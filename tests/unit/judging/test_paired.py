"""Paired-run statistics (`pytest_mxperf.judging.pairstats`): the interval, the decision, its
message and suggested rounds, block pairs, and degenerate input (the t distribution:
test_tdist.py; simulated runs: test_pair_simulations.py)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from paired_data import need_more_rounds, pairs_of, rounds_from

from pytest_mxperf.judging.pairplan import MAX_SUGGESTED_ROUNDS
from pytest_mxperf.judging.pairstats import (
    Decision,
    PairedEstimate,
    PairedRound,
    decide,
    paired_estimate,
)
from pytest_mxperf.measuring.stats import median_noise
from pytest_mxperf.paired.more_rounds import could_still_regress


def test_could_still_regress_projects_the_interval_to_the_rounds_left() -> None:
    # -1% with rounds 7% apart: not even 10 rounds could put the 99% interval below 1.
    noisy = paired_estimate(rounds_from([0.92, 1.05, 1.0]))
    assert noisy.decision is Decision.UNKNOWN and noisy.ratio < 1.0
    assert not could_still_regress(noisy, 7)
    assert could_still_regress(noisy, 200)  # given rounds enough, it might
    # -5% at about 1.5% a round: a few more rounds decide it.
    loss = paired_estimate(rounds_from([0.94, 0.965, 0.945]))
    assert loss.decision is Decision.UNKNOWN
    assert could_still_regress(loss, 7)
    assert not could_still_regress(loss, 0)
    # Slower by 0.5% at 0.6% a round: it may become "slower, less than the minimum effect",
    # never regressed (the interval never reaches 5% down once it lies below 1).
    small = paired_estimate(rounds_from([0.99, 1.0, 0.995]))
    assert not could_still_regress(small, 7)


# --- the decision rule -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        (0.85, 0.97, Decision.REGRESSED),  # below 1 and reaches a 5% drop
        (0.90, 0.94, Decision.REGRESSED),  # entirely beyond the minimum effect
        (0.96, 0.99, Decision.SAME),  # real, but confidently smaller than 5%
        (0.97, 1.03, Decision.SAME),
        (1.01, 1.04, Decision.SAME),
        (1.02, 1.08, Decision.IMPROVED),
        (0.93, 1.01, Decision.UNKNOWN),  # may be a 7% drop, may be nothing
        (0.99, 1.06, Decision.NOT_SLOWER),  # a 5% loss ruled out; may be 6% faster
        (0.96, 1.20, Decision.NOT_SLOWER),
        (0.95, 1.06, Decision.UNKNOWN),  # a 5% loss not ruled out
        (0.90, 1.10, Decision.UNKNOWN),
    ],
)
def test_decide(low: float, high: float, expected: Decision) -> None:
    assert decide(low, high, 0.05) is expected


def test_identical_rounds_give_a_nonzero_interval_and_same() -> None:
    est = paired_estimate(rounds_from([1.0, 1.0, 1.0]))
    assert est.ratio == pytest.approx(1.0)
    assert est.sd == pytest.approx(0.005)  # the fixed floor
    assert est.low < 0.98 and est.high > 1.02
    assert est.decision is Decision.SAME
    assert est.suggested_rounds is None
    assert (round(est.low, 3), round(est.high, 3)) == (0.972, 1.029)


def test_the_estimate_is_the_geometric_mean_of_ratios() -> None:
    est = paired_estimate(
        [PairedRound(100.0, 90.0), PairedRound(200.0, 160.0), PairedRound(50.0, 43.0)]
    )
    assert est.ratio == pytest.approx((0.9 * 0.8 * 0.86) ** (1 / 3))
    assert est.ratios == pytest.approx((0.9, 0.8, 0.86))
    assert est.n_rounds == 3
    assert est.low < est.ratio < est.high


def test_within_process_noise_widens_the_interval() -> None:
    quiet = paired_estimate(rounds_from([0.97, 0.97, 0.97]))
    noisy_blocks = (950.0, 1000.0, 1050.0, 900.0, 1100.0, 1000.0)
    noisy = paired_estimate(
        [PairedRound(1000.0, 970.0, noisy_blocks, tuple(b * 0.97 for b in noisy_blocks))] * 3
    )
    assert quiet.sd == pytest.approx(0.005)
    assert noisy.sd_between == pytest.approx(0.0, abs=1e-12)
    assert noisy.sd == noisy.sd_within > 0.02
    assert noisy.high - noisy.low > quiet.high - quiet.low
    # Three quiet rounds at -3%: a certain loss inside the minimum effect (the equivalence
    # interval, asked first, rules out -5%), a pass. With noisy blocks: undecided.
    assert quiet.decision is Decision.SAME
    assert quiet.same_high < 1.0
    assert noisy.decision is Decision.UNKNOWN


def test_median_noise() -> None:
    assert median_noise([]) == 0.0
    assert median_noise([1000.0]) == 0.0
    assert median_noise([1000.0] * 8) == 0.0
    # Robust: one wild block barely moves it.
    calm = [990.0, 1000.0, 1010.0, 995.0, 1005.0, 1000.0, 998.0, 1002.0]
    assert median_noise([*calm[:-1], 10.0]) < 2 * median_noise(calm)
    # More blocks, smaller standard error of the median.
    assert median_noise(calm * 4) < median_noise(calm)


def test_a_confidently_small_slowdown_is_same_and_says_so() -> None:
    est = paired_estimate(rounds_from([0.981, 0.979, 0.980, 0.982, 0.978]))
    assert est.high < 1.0 or est.low > 1.0  # the interval excludes no change
    assert est.decision is Decision.SAME
    assert est.ratio == pytest.approx(0.98, abs=0.001) and est.high < 1.0


def test_regressed_and_improved() -> None:
    slow = paired_estimate(rounds_from([0.90, 0.91, 0.89, 0.90, 0.905]))
    assert slow.decision is Decision.REGRESSED
    assert slow.change == pytest.approx(-0.099, abs=0.001) and 0.8 < slow.low < slow.high < 1
    fast = paired_estimate(rounds_from([1.12, 1.11, 1.13]))
    assert fast.decision is Decision.IMPROVED
    assert fast.change == pytest.approx(0.12, abs=0.001)


def test_unknown_suggests_rounds_and_asks_for_more() -> None:
    est = paired_estimate(rounds_from([0.92, 1.0, 1.06]))
    assert est.decision is Decision.UNKNOWN
    assert est.suggested_rounds is not None and 3 < est.suggested_rounds < MAX_SUGGESTED_ROUNDS
    assert need_more_rounds(est, rounds_done=3, max_rounds=5)
    assert not need_more_rounds(est, rounds_done=5, max_rounds=5)
    assert est.change == pytest.approx(-0.008, abs=0.001)
    assert est.sd == pytest.approx(0.071, abs=0.001)


def test_suggested_rounds_are_enough_when_the_noise_holds() -> None:
    # Feed the suggested number of rounds with the same spread: it then decides.
    pattern = [0.95, 1.0, 0.98, 1.03, 0.96]
    est = paired_estimate(rounds_from(pattern[:3]))
    assert est.decision is Decision.UNKNOWN and est.suggested_rounds is not None
    longer = paired_estimate(rounds_from((pattern * 100)[: est.suggested_rounds + 5]))
    assert longer.decision is not Decision.UNKNOWN


def test_decided_estimates_need_no_more_rounds() -> None:
    est = paired_estimate(rounds_from([0.9, 0.9, 0.9]))
    assert est.decision is Decision.REGRESSED
    assert not need_more_rounds(est, rounds_done=3, max_rounds=10)
    with pytest.raises(ValueError, match="max_rounds must be >= 1"):
        need_more_rounds(est, 3, 0)


# --- degenerate input ------------------------------------------------------------------------


def test_one_round_is_refused() -> None:
    with pytest.raises(ValueError, match="needs at least 2 rounds, got 1"):
        paired_estimate(rounds_from([0.9]))
    with pytest.raises(ValueError, match="got 0"):
        paired_estimate([])


@pytest.mark.parametrize(
    ("rnd", "words"),
    [
        (PairedRound(0.0, 100.0), "round 1: rev images/sec must be a positive number, got 0.0"),
        (PairedRound(100.0, 0.0), "round 1: head images/sec must be a positive number, got 0.0"),
        (PairedRound(100.0, -5.0), "round 1: head images/sec"),
        (
            PairedRound(math.nan, 100.0),
            "round 1: rev images/sec must be a positive number, got nan",
        ),
        (PairedRound(100.0, math.inf), "round 1: head"),
        (
            PairedRound(100.0, 100.0, (100.0, 0.0)),
            "round 1: rev block rates must be positive, got 0.0",
        ),
    ],
)
def test_bad_rates_are_refused_naming_the_round_and_side(rnd: PairedRound, words: str) -> None:
    with pytest.raises(ValueError) as info:
        paired_estimate([PairedRound(100.0, 100.0), rnd])
    assert words in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"confidence": 1.0}, "confidence must be in (0, 1)"),
        ({"confidence": 0.0}, "confidence"),
        ({"min_effect": 0.0}, "min_effect must be in (0, 1)"),
        ({"min_effect": 1.5}, "min_effect"),
        ({"noise_floor": -0.1}, "noise_floor must be >= 0"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        paired_estimate(rounds_from([1.0, 1.0, 1.0]), **kwargs)


def test_the_estimate_is_a_frozen_record() -> None:
    est = paired_estimate(rounds_from([1.0, 1.01, 0.99]))
    assert isinstance(est, PairedEstimate)
    with pytest.raises(AttributeError):
        est.ratio = 2.0  # type: ignore[misc]


def test_a_round_timed_in_turns_takes_its_ratio_and_noise_from_the_block_pairs() -> None:
    # Five pairs, one of them a burst (HEAD's block 50% faster): each side's throughput is its
    # items over its time (the harmonic mean of its block rates), every pair counted.
    rev = (100.0, 100.0, 100.0, 100.0, 100.0)
    head = (90.0, 95.0, 96.0, 97.0, 150.0)
    rnd = PairedRound(100.0, 100.0, pairs=tuple(zip(rev, head)))
    throughput = 5 / sum(1 / h for h in head)
    assert rnd.ratio == pytest.approx(throughput / 100.0)
    # Its noise, the delta method's: the SD of t_rev/mean(t_rev) - t_head/mean(t_head) over
    # sqrt(5), with 4 degrees of freedom; the burst makes it wide (more pairs are bought).
    t_head = [1 / h for h in head]
    d = [1.0 - t / (sum(t_head) / 5) for t in t_head]
    assert rnd.within_noise == pytest.approx(math.sqrt(sum(x * x for x in d) / 4 / 5))
    assert rnd.within_noise > 0.05
    assert rnd.within_df == 4
    # Fewer than 2 pairs: the medians' ratio.
    assert PairedRound(100.0, 90.0, pairs=((100.0, 95.0),)).ratio == pytest.approx(0.9)


def test_block_pairs_decide_a_pair_whose_medians_drifted() -> None:
    # The machine sped up and slowed down between rounds: the medians' ratios disagree, the
    # blocks timed in turns do not (HEAD 4% slower in every pair).
    pairs = pairs_of([math.log(0.96)] * 5)
    rounds = [PairedRound(100.0, head, pairs=pairs) for head in (110.0, 85.0, 97.0) * 2]
    est = paired_estimate(rounds)
    assert est.ratio == pytest.approx(0.96)
    assert est.decision is Decision.SAME and (est.high < 1.0 or est.low > 1.0)  # certain, < 5%
    unpaired = paired_estimate([PairedRound(r.rev, r.head) for r in rounds])
    assert unpaired.decision is Decision.UNKNOWN


@pytest.mark.parametrize("rate", [math.nan, 0.0, -1.0])
def test_a_block_pair_that_is_not_a_number_is_named(rate: float) -> None:
    good, bad = ((1.0, 1.0), (1.0, 1.0)), ((1.0, rate), (1.0, 1.0))
    for first in (PairedRound(1.0, 1.0), PairedRound(1.0, 1.0, pairs=good)):
        with pytest.raises(ValueError, match="round 1: block-pair rates must be positive"):
            paired_estimate([first, PairedRound(1.0, 1.0, pairs=bad)])
