"""Whole-case turns: a case a lock-step side runs alone measured twice a round, merged, and
judged from the two sides' turn pairs (`case.wholeturns`, `paired.pairdata.whole_turn_pairs`)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_mxperf.baselines.resolution import BaselineRef
from pytest_mxperf.case.wholeturns import measure_in_turns, merge_measurements, merge_turns
from pytest_mxperf.config.casekey import CaseKey
from pytest_mxperf.judging.pairstats import (
    WHOLE_CASE_SAME_CONFIDENCE,
    PairedRound,
    paired_estimate,
)
from pytest_mxperf.judging.roundeffect import RoundNoise, round_noise
from pytest_mxperf.measuring.measure import TURN_RATES
from pytest_mxperf.measuring.records import CaseResult, Status
from pytest_mxperf.paired.pairdata import HEAD, REV, PairedData, SideResult, whole_turn_pairs
from pytest_mxperf.testing import measurement_at

KEY = CaseKey.parse("imagefolder-224px/pipeline/float32/bs32/cpu/num_workers=2")


def _result(*rates: float, warnings: tuple[str, ...] = ()) -> CaseResult:
    return CaseResult(
        KEY,
        "cpu(0)",
        "hw",
        measurement=measurement_at(rates),
        attempts=[sorted(rates)[len(rates) // 2]],
        warnings=list(warnings),
    )


def test_turns_merge_into_one_figure_over_all_blocks_with_each_turns_rate() -> None:
    merged = merge_turns(
        [_result(100.0, 110.0, 120.0, warnings=("w",)), _result(90.0, 95.0, 85.0, warnings=("w",))]
    )
    m = merged.measurement
    assert m is not None
    assert sorted(m.block_rates) == pytest.approx([85, 90, 95, 100, 110, 120])
    assert merged.images_per_sec == pytest.approx(97.5)  # the median over both turns' blocks
    assert m.extra[TURN_RATES] == pytest.approx([110.0, 90.0])
    assert merged.attempts == [110.0, 90.0] and merged.warnings == ["w"]


def test_blocks_of_other_sizes_are_scaled_to_the_first_turns() -> None:
    one = replace(measurement_at([100.0, 100.0]), steps_per_block=2)  # 2 steps in 0.01 s
    other = measurement_at([50.0, 50.0])  # 1 step in 0.02 s
    merged = merge_measurements([one, other])
    # Each block keeps its own pace: 200/s and 50/s, now all of 2 steps.
    assert merged.block_rates == pytest.approx([200.0, 200.0, 50.0, 50.0])
    assert merged.block_seconds[2:] == pytest.approx((0.04, 0.04))
    with pytest.raises(ValueError, match="images per step: not one case"):
        merge_measurements([one, replace(other, items_per_step=4)])


def test_a_turn_that_measured_nothing_ends_the_case_as_it_ended() -> None:
    oom = CaseResult(KEY, "cpu(0)", "hw", status=Status.OOM, error="out of memory")
    assert merge_turns([_result(100.0, 101.0), oom]) is oom
    with pytest.raises(ValueError, match="no turns"):
        merge_turns([])


class _Baton:
    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def alone(self, nodeid: str, key: str) -> None:
        self.asked.append((nodeid, key))


def test_each_turn_waits_for_its_own_turn_and_a_failed_first_turn_stops() -> None:
    baton = _Baton()
    figures = iter([_result(100.0, 102.0), _result(98.0, 97.0)])

    def measure(result: CaseResult) -> tuple[CaseResult, BaselineRef | None]:
        return next(figures), None

    start = CaseResult(KEY, "cpu(0)", "hw")
    merged, _ = measure_in_turns(baton, "t.py::a", start, measure, 2)
    assert baton.asked == [("t.py::a", str(KEY))] * 2
    assert merged.measurement is not None and len(merged.measurement.extra[TURN_RATES]) == 2
    assert len(merged.window) == 2 and merged.window[0] <= merged.window[1]

    failed = CaseResult(KEY, "cpu(0)", "hw", status=Status.ERROR, error="boom")
    baton = _Baton()
    merged, _ = measure_in_turns(baton, "t.py::a", start, lambda r: (failed, None), 2)
    assert len(baton.asked) == 1 and merged.status is Status.ERROR
    with pytest.raises(ValueError, match="turns must be >= 1"):
        measure_in_turns(baton, "t.py::a", start, measure, 0)


def _side(turns: list[float]) -> CaseResult:
    m = measurement_at(turns)
    return CaseResult(KEY, "cpu(0)", "hw", measurement=replace(m, extra={TURN_RATES: turns}))


def _run(rounds: list[tuple[list[float], list[float]]]) -> PairedData:
    data = PairedData("HEAD~1", "abc")
    for rev, head in rounds:
        rnd = {REV: SideResult(), HEAD: SideResult()}
        rnd[REV].cases[str(KEY)] = _side(rev)
        rnd[HEAD].cases[str(KEY)] = _side(head)
        data.rounds.append(rnd)
    return data


def test_two_turns_a_side_make_two_whole_pairs_a_round() -> None:
    assert whole_turn_pairs(_side([100.0, 90.0]), _side([99.0, 92.0])) == (
        (100.0, 99.0),
        (90.0, 92.0),
    )
    # One turn on either side (an older side, a failed turn): no pairs, the medians' ratio.
    assert whole_turn_pairs(_side([100.0]), _side([99.0])) == ()
    assert whole_turn_pairs(_side([100.0, 90.0]), _side([99.0])) == ()
    rounds = _run([([100.0, 90.0], [99.0, 92.0]), ([95.0, 100.0], [96.0, 98.0])]).paired_rounds(
        str(KEY)
    )
    assert all(r.whole and r.blocks is not None for r in rounds)
    # The round's ratio is the throughput ratio over its two pairs: a drift of the machine over
    # the round (90 after 100) weighs on both sides alike.
    assert rounds[0].ratio == pytest.approx((1 / 100 + 1 / 90) / (1 / 99 + 1 / 92))


def test_whole_pairs_take_no_round_effect_and_keep_the_whole_case_level() -> None:
    rounds = [
        PairedRound(100.0, 100.0, pairs=((100.0, 101.0), (96.0, 99.0)), whole=True),
        PairedRound(100.0, 100.0, pairs=((98.0, 97.0), (101.0, 97.0)), whole=True),
    ]
    assert round_noise([rounds]) is None  # they do not count in the run's effect ...
    noise = RoundNoise(0.01, 30, 0.012)
    est = paired_estimate(rounds, pooled=noise)
    assert est.pooled is None  # ... nor take it
    assert est.same_level == WHOLE_CASE_SAME_CONFIDENCE
    # Their pairs still give each round its noise and its degrees of freedom.
    assert all(r.within_df == 1 and r.within_noise > 0 for r in rounds)
