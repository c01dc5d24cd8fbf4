"""The run's round effect (`pytest_mxperf.judging.roundeffect`): the spread between rounds that block noise
does not explain, pooled over a run's cases, gives an equivalence interval to a case whose own
rounds agree with it; the 99% interval that fails a case never takes it."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest
from paired_data import pairs_of

from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.judging.pairstats import (
    POOLED_DF_FOR_SAME,
    SAME_CONFIDENCE,
    UNPOOLED_SAME_CONFIDENCE,
    Decision,
    PairedRound,
    default_same_level,
    paired_estimate,
)
from pytest_mxperf.judging.roundeffect import RoundNoise, round_noise
from pytest_mxperf.judging.tdist import chi2_quantile
from pytest_mxperf.measuring.records import CaseResult
from pytest_mxperf.measuring.stats import mean_sd
from pytest_mxperf.paired import pairdata
from pytest_mxperf.paired.pairdata import HEAD, REV, PairedData, SideResult
from pytest_mxperf.testing import measurement_at


def _round(center: float, spread: float = 0.01, n: int = 3) -> PairedRound:
    """A round of ``n`` block pairs around ``center`` (log ratio), evenly spread."""
    logs = tuple(center + spread * (i - (n - 1) / 2) / ((n - 1) / 2) for i in range(n))
    return PairedRound(100.0, 100.0 * math.exp(center), pairs=pairs_of(logs))


@pytest.mark.parametrize(("df", "exact"), [(1, 6.635), (2, 9.210), (4, 13.277), (10, 23.209)])
def test_chi2_quantile_is_within_one_percent_at_99(df: int, exact: float) -> None:
    assert chi2_quantile(0.99, df) == pytest.approx(exact, rel=0.01)


@pytest.mark.parametrize(("p", "df", "words"), [(1.0, 2, "quantile level"), (0.5, 0, "freedom")])
def test_chi2_quantile_refuses_bad_input(p: float, df: int, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        chi2_quantile(p, df)


def test_the_round_effect_is_the_spread_blocks_do_not_explain_pooled_over_cases() -> None:
    cases = [[_round(0.02), _round(-0.02)], [_round(0.0), _round(0.01), _round(-0.01)]]
    expected_excess, df = 0.0, 0
    for rounds in cases:
        _, between = mean_sd([math.log(r.ratio) for r in rounds])
        within = sum(r.within_noise**2 for r in rounds) / len(rounds)
        expected_excess += (len(rounds) - 1) * (between**2 - within)
        df += len(rounds) - 1
    noise = round_noise(cases)
    assert noise is not None and noise.df == 3 == df
    assert noise.sd == pytest.approx(math.sqrt(expected_excess / df))
    assert noise.spread == pytest.approx(math.sqrt((0.04**2 / 2 + 0.01**2 * 2) / 3))
    assert noise.sd > 0.01  # rounds 2-4% apart, blocks that explain well under 1%


def test_no_round_effect_without_block_pairs_or_a_second_round() -> None:
    medians = [PairedRound(100.0, 101.0), PairedRound(100.0, 97.0)]
    assert round_noise([medians, [_round(0.01)]]) is None
    assert round_noise([]) is None
    # Rounds that agree better than their blocks predict: no effect, not a negative one.
    calm = round_noise([[_round(0.001, 0.05), _round(-0.001, 0.05)]])
    assert calm is not None and (calm.sd, calm.df) == (0.0, 1)
    assert calm.spread == pytest.approx(0.002 / math.sqrt(2))


def test_two_rounds_a_little_apart_pass_with_the_runs_round_effect() -> None:
    rounds = [_round(0.015), _round(-0.010)]  # 2.5% apart, blocks predicting ~0.6%
    alone = paired_estimate(rounds)
    assert alone.decision is Decision.UNKNOWN and alone.df == 1 and alone.pooled is None
    noise = RoundNoise(0.008, 15, 0.011)  # what 15 cases of the run showed
    pooled = paired_estimate(rounds, pooled=noise)
    assert pooled.pooled == noise and pooled.df > 1
    assert pooled.decision is Decision.SAME
    assert alone.same_low < 0.95 < pooled.same_low < 1.0 < pooled.same_high < 1.05 < alone.same_high
    # The 99% interval that fails a case is the case's own.
    assert (pooled.low, pooled.high) == (alone.low, alone.high)


def test_a_case_whose_rounds_disagree_beyond_the_model_keeps_its_own_spread() -> None:
    rounds = [_round(0.06), _round(-0.06)]
    noise = RoundNoise(0.008, 15, 0.011)
    est = paired_estimate(rounds, pooled=noise)
    assert est.pooled is None and est.decision is Decision.UNKNOWN
    own = paired_estimate(rounds, same_confidence=est.same_level)
    assert est.same_level == SAME_CONFIDENCE
    assert (est.same_low, est.same_high) == pytest.approx((own.same_low, own.same_high))


def test_rounds_of_medians_never_take_the_round_effect() -> None:
    rounds = [PairedRound(100.0, 100.5), PairedRound(100.0, 99.0)]
    est = paired_estimate(rounds, pooled=RoundNoise(0.0, 30, 0.005))
    assert est.pooled is None and est == paired_estimate(rounds)


def test_one_case_alone_is_judged_as_without_pooling() -> None:
    rounds = [_round(0.015), _round(-0.010)]
    alone = paired_estimate(rounds, pooled=round_noise([rounds]))
    assert alone.df == 1 and alone.decision is paired_estimate(rounds).decision


def test_the_stricter_level_needs_a_round_effect_from_other_cases() -> None:
    rounds = [_round(0.015), _round(-0.010)]
    # Alone in its run (its own round counted in the effect), or no effect at all: 90%.
    assert paired_estimate(rounds, pooled=round_noise([rounds])).same_level == 0.90
    assert paired_estimate(rounds).same_level == UNPOOLED_SAME_CONFIDENCE == 0.90
    # Three other cases of two rounds: not yet; four: 95%.
    others = [[_round(0.004), _round(-0.004)] for _ in range(POOLED_DF_FOR_SAME)]
    short = round_noise([rounds, *others[1:]])
    assert short is not None and default_same_level(rounds, short) == 0.90
    enough = round_noise([rounds, *others])
    assert enough is not None and default_same_level(rounds, enough) == SAME_CONFIDENCE == 0.95
    # A case's own later rounds do not count as others: five rounds alone stay at 90%.
    five = [_round(x) for x in (0.01, -0.01, 0.004, -0.004, 0.0)]
    assert default_same_level(five, round_noise([five])) == 0.90
    # Rounds of medians keep 90% whatever the run's effect.
    medians = [PairedRound(100.0, 100.5), PairedRound(100.0, 99.0)]
    assert default_same_level(medians, enough) == 0.90


def test_a_loss_beyond_the_minimum_effect_is_never_a_pass_by_pooling() -> None:
    rounds = [_round(math.log(0.93)), _round(math.log(0.945))]
    est = paired_estimate(rounds, pooled=RoundNoise(0.0, 100, 0.005))
    assert est.pooled is not None and est.decision is not Decision.SAME


def _timed_in_turns(key: CaseKey, rates: tuple[float, ...]) -> CaseResult:
    """A case result of blocks timed in turns at ``rates``."""
    m = measurement_at(rates, interleaved=True)
    return CaseResult(key, "cpu(0)", "hw", measurement=m, nodeid=f"t.py::{key}")


def _data(heads: dict[CaseKey, list[float]]) -> PairedData:
    """A paired run whose cases' HEAD/REV log ratios per round are ``heads``; 3 pairs a round."""
    data = PairedData("HEAD~1", "abc")
    for index in range(max(len(v) for v in heads.values())):
        rnd = {REV: SideResult(), HEAD: SideResult()}
        for key, logs in heads.items():
            if index >= len(logs):
                continue
            rev_rates, head_rates = zip(*_round(logs[index]).pairs)
            rnd[REV].cases[key] = _timed_in_turns(key, rev_rates)
            rnd[HEAD].cases[key] = _timed_in_turns(key, head_rates)
        data.rounds.append(rnd)
    return data


#: Eight model cases whose two rounds agree within their blocks: the run's round effect.
CALM = {
    CaseKey.parse(f"m{i}/inference/float32/bs1/cpu"): [0.004 * (-1) ** i, -0.004 * (-1) ** i]
    for i in range(8)
}


def test_a_paired_run_judges_each_case_with_the_round_effect_of_all() -> None:
    x = CaseKey.parse("x/inference/float32/bs1/cpu")
    data = _data({**CALM, x: [0.015, -0.010]})
    noise = data.round_noise()
    assert noise is not None and noise.df == 9
    est = data.estimate(x, 0.05)
    assert est is not None and est.pooled == noise and est.decision is Decision.SAME
    # Alone in its run, the same rounds stay undecided: its one spread has one freedom.
    alone = _data({x: [0.015, -0.010]}).estimate(x, 0.05)
    assert alone is not None and alone.decision is Decision.UNKNOWN
    assert pairdata.undecided(data, [x], 0.05) == []


def test_an_input_pipeline_timed_in_turns_neither_gives_nor_takes_the_round_effect() -> None:
    # A DataLoader without workers, timed in block pairs: its rounds swing with its own random
    # crops, so the models' round effect would narrow its interval (and its swings widen theirs).
    pipe = CaseKey.parse("loader/pipeline/float32/bs32/cpu")
    data = _data({**CALM, pipe: [0.015, -0.010]})
    noise = data.round_noise()
    assert noise is not None and noise.df == 8  # the eight models' rounds only
    assert noise == _data(CALM).round_noise()
    est = data.estimate(pipe, 0.05)
    assert est is not None and est.pooled is None and est.decision is Decision.UNKNOWN
    assert est.same_level == UNPOOLED_SAME_CONFIDENCE
    # The same rounds as a model's take the round effect and pass (the test above).


def _simulated_runs(
    loss: float, pooled: bool, same_confidence: float, seed: int
) -> tuple[Counter[Decision], float]:
    """Runs of 15 cases: each round's log ratio is the loss, a round effect shared by nothing
    but that round (SD 0.8%), and 3 block pairs of 2% noise each side; rounds until decided
    (up to 6). Decisions of every case and the mean rounds it took."""
    rng = random.Random(seed)
    said: Counter[Decision] = Counter()
    rounds_taken = 0

    def one() -> PairedRound:
        center = math.log(1.0 - loss) + rng.gauss(0.0, 0.008)
        pairs = tuple(
            (100.0 * math.exp(rng.gauss(0, 0.02)), 100.0 * math.exp(center + rng.gauss(0, 0.02)))
            for _ in range(3)
        )
        return PairedRound(100.0, 100.0, pairs=pairs)

    for _ in range(40):
        cases = [[one(), one()] for _ in range(15)]
        done: dict[int, Decision] = {}
        while len(done) < len(cases):
            noise = round_noise(cases) if pooled else None
            for i, rounds in enumerate(cases):
                if i in done:
                    continue
                est = paired_estimate(rounds, pooled=noise, same_confidence=same_confidence)
                if est.decision is not Decision.UNKNOWN or len(rounds) >= 6:
                    done[i] = est.decision
                    said[est.decision] += 1
                    rounds_taken += len(rounds)
                else:
                    rounds.append(one())
    return said, rounds_taken / sum(said.values())


def test_the_model_at_95_passes_identical_code_sooner_and_catches_losses_as_often() -> None:
    # Seeded: the rates are fixed numbers, printed by the messages.
    aa_old, aa_old_rounds = _simulated_runs(0.0, pooled=False, same_confidence=0.90, seed=5)
    aa_new, aa_new_rounds = _simulated_runs(0.0, pooled=True, same_confidence=0.95, seed=5)
    ab_old, _ = _simulated_runs(0.05, pooled=False, same_confidence=0.90, seed=6)
    ab_new, _ = _simulated_runs(0.05, pooled=True, same_confidence=0.95, seed=6)
    message = (
        f"A/A: {dict(aa_old)} in {aa_old_rounds:.2f} rounds unpooled at 90%, {dict(aa_new)} in "
        f"{aa_new_rounds:.2f} pooled at 95%; 5% loss: {dict(ab_old)} / {dict(ab_new)}"
    )

    def passes(said: Counter[Decision]) -> int:
        return said[Decision.SAME] + said[Decision.NOT_SLOWER]

    assert aa_new[Decision.REGRESSED] == 0 and passes(aa_new) >= 0.98 * 600, message
    assert aa_new_rounds < aa_old_rounds - 0.1, message
    assert passes(ab_new) <= passes(ab_old), message
    assert ab_new[Decision.REGRESSED] >= ab_old[Decision.REGRESSED], message
