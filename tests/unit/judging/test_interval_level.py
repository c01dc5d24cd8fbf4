"""A paired verdict records the level its interval was taken at (`Verdict.interval_level`):
the equivalence interval's for a pass, the 99% one's otherwise; JSON carries it both ways."""

from __future__ import annotations

import math

import pytest

from pytest_mxperf.judging.decisions import (
    Policy,
    decide_arbitrated,
    decide_arbitration_pair,
    decide_paired,
)
from pytest_mxperf.judging.pairstats import PairedRound, paired_estimate
from pytest_mxperf.judging.tdist import t_quantile
from pytest_mxperf.measuring.records import Outcome, Verdict
from pytest_mxperf.system import codec


def _estimate(*ratios: float):  # type: ignore[no-untyped-def]
    return paired_estimate([PairedRound(100.0, 100.0 * r) for r in ratios])


def test_a_pass_records_its_equivalence_level_anything_else_the_99_percent() -> None:
    same = _estimate(1.0, 1.001, 0.999)
    passed = decide_paired(same, Policy())
    assert passed.outcome is Outcome.PASS
    assert passed.interval == (same.same_low, same.same_high)
    assert passed.interval_level == same.same_level and same.same_level < same.confidence
    slower = _estimate(0.9, 0.9, 0.9)
    regressed = decide_paired(slower, Policy())
    assert regressed.outcome is Outcome.REGRESSED
    assert regressed.interval == (slower.low, slower.high)
    assert regressed.interval_level == slower.confidence == 0.99
    assert decide_paired(None, Policy()).interval_level is None  # no interval, no level


def test_an_arbitrated_verdict_carries_the_pairs_level() -> None:
    stored = Verdict(Outcome.REGRESSED, True, ("m: -27.4%",), -0.274, threshold=0.30)
    pair = decide_arbitration_pair(_estimate(1.0, 1.001, 0.999), stored, Policy())
    verdict = decide_arbitrated(stored, pair, False)
    assert verdict.interval == pair.interval and verdict.interval_level == pair.interval_level
    assert verdict.interval_level is not None


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99, None])
def test_the_level_goes_through_json(level: float | None) -> None:
    verdict = Verdict(Outcome.PASS, False, interval=(0.98, 1.02), interval_level=level)
    data = codec.to_dict(verdict)
    assert data["interval_level"] == level
    assert codec.from_dict(Verdict, data) == verdict
    del data["interval_level"]  # a report written before the field: read as unknown
    assert codec.from_dict(Verdict, data).interval_level is None


def _blocks(ratio: float, jitter: float) -> PairedRound:
    """A round of 5 block pairs whose HEAD/REV ratios spread by about ``jitter``."""
    pairs = tuple((100.0, 100.0 * ratio * (1 + jitter * k)) for k in (-2, -1, 0, 1, 2))
    return PairedRound(100.0, 100.0 * ratio, pairs=pairs)


def _se(verdict: Verdict) -> float:
    """The standard error of log(ratio) the verdict's interval gives back with its own df."""
    assert verdict.interval is not None and verdict.interval_level is not None
    assert verdict.interval_df is not None
    low, high = verdict.interval
    quantile = t_quantile(0.5 + verdict.interval_level / 2, verdict.interval_df)
    return (math.log(high) - math.log(low)) / 2 / quantile


def test_a_verdict_records_the_df_that_gives_back_its_estimates_standard_error() -> None:
    # Three rounds, 8% slower: the 99% interval's t quantile has 2 degrees of freedom (9.92,
    # 3.9 times the normal 2.58), and its half-width over it is the estimate's own SE.
    slower = _estimate(0.92, 0.91, 0.93)
    regressed = decide_paired(slower, Policy())
    assert regressed.outcome is Outcome.REGRESSED and regressed.interval_df == 2
    assert _se(regressed) == pytest.approx(slower.sd / math.sqrt(3), rel=1e-9)
    # A pass rests on its equivalence interval, whose df is the estimate's (`PairedEstimate.df`).
    same = _estimate(1.0, 1.001, 0.999)
    passed = decide_paired(same, Policy())
    assert passed.interval_df == same.df == 2
    assert _se(passed) == pytest.approx(same.sd / math.sqrt(3), rel=1e-9)


def test_the_99_percent_intervals_df_is_the_rounds_even_when_the_equivalence_one_has_more() -> None:
    # Rounds that agree better than their block pairs predict: the equivalence interval takes
    # the blocks' degrees of freedom (3 rounds of 5 pairs: 12), the 99% one still n - 1 = 2.
    slower = paired_estimate([_blocks(0.90, 0.01), _blocks(0.901, 0.01), _blocks(0.899, 0.01)])
    assert slower.df == 12
    regressed = decide_paired(slower, Policy())
    assert regressed.outcome is Outcome.REGRESSED and regressed.interval_df == 2
    assert _se(regressed) == pytest.approx(slower.sd / math.sqrt(3), rel=1e-9)
    same = paired_estimate([_blocks(1.0, 0.01), _blocks(1.001, 0.01), _blocks(0.999, 0.01)])
    passed = decide_paired(same, Policy())
    assert passed.outcome is Outcome.PASS and passed.interval_df == same.df == 12
    assert _se(passed) == pytest.approx(same.sd / math.sqrt(3), rel=1e-9)


def test_an_arbitrated_verdict_carries_the_pairs_df() -> None:
    stored = Verdict(Outcome.REGRESSED, True, ("m: -27.4%",), -0.274, threshold=0.30)
    for estimate in (_estimate(1.0, 1.001, 0.999), _estimate(0.9, 0.91, 0.89)):
        pair = decide_arbitration_pair(estimate, stored, Policy())
        verdict = decide_arbitrated(stored, pair, False)
        assert verdict.interval_df == pair.interval_df is not None
        assert _se(verdict) == pytest.approx(estimate.sd / math.sqrt(3), rel=1e-9)
    # A pair that the stored threshold clears rests on its equivalence interval and its df.
    wide = _estimate(0.97, 1.03, 0.95)
    pair = decide_arbitration_pair(wide, stored, Policy())
    assert pair.interval == (wide.same_low, wide.same_high) and pair.interval_df == wide.df


@pytest.mark.parametrize("df", [2, 12, None])
def test_the_df_goes_through_json(df: int | None) -> None:
    verdict = Verdict(
        Outcome.PASS, False, interval=(0.98, 1.02), interval_level=0.9, interval_df=df
    )
    data = codec.to_dict(verdict)
    assert data["interval_df"] == df
    assert codec.from_dict(Verdict, data) == verdict
    del data["interval_df"]  # a report written before the field: read as unknown
    assert codec.from_dict(Verdict, data).interval_df is None
